#include "store/mysql_store.h"
