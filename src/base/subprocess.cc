#include "base/subprocess.h"
