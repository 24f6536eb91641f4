// flashsale_config_template: prints the config file with every setting commented out at its
// default (app::ConfigFileTemplate). Run at build time to make the packaged
// /etc/flashsale/flashsale.toml.

#include <iostream>

#include "app/config.h"

int main() {
  std::cout << flashsale::app::ConfigFileTemplate();
  return 0;
}
