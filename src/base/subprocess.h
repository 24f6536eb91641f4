#pragma once
// Being filled in: child processes (spawn, signal, wait with a timeout).
