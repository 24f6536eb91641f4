#pragma once
// Being filled in: the MySQL/MariaDB store (MariaDB Connector/C).
