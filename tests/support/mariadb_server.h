#pragma once
// Being filled in: a real mariadb-server for tests.
