#pragma once
// Being filled in: the private redis-server of the embedded default.
