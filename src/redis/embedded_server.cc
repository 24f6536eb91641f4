#include "redis/embedded_server.h"
