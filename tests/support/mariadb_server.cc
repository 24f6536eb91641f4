#include "support/mariadb_server.h"
