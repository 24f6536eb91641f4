// A Node.js peer of flashsale's purchase contract, for bench/hot_path.sh (issue 34): the hot
// path as a small, idiomatic Node service would write it, to compare flashsale against.
//
//   node bench/node_peer/server.mjs --port P --redis-socket PATH [--workers 2]
//
// - node:http in cluster mode: the primary forks --workers workers that share the listening port.
// - Each worker keeps one ioredis connection with enableAutoPipelining (the commands issued in
//   one turn of the event loop leave as one pipeline).
// - One Lua script with 3 keys per activity decides a purchase: the stock (a counter), the
//   buyers (a set: one unit per buyer) and the order intents (a stream, XADD). Nothing is
//   persisted by the peer: it runs on a redis-server the bench starts without AOF or RDB.
// - POST /api/v1/activities/<id>/purchase, the user in X-User-Id (flashsale's gateway identity),
//   no body (one unit). The reply is a small JSON of flashsale's shape and codes: 1 reserved,
//   0 already_purchased, -1 sold_out, -4 unknown_activity. An activity exists once its stock key
//   is set (`SET peer:{<id>}:stock N`, the bench does it).
import cluster from 'node:cluster';
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import Redis from 'ioredis';

const { values: args } = parseArgs({
  options: {
    port: { type: 'string' },
    'redis-socket': { type: 'string' },
    workers: { type: 'string', default: '2' },
  },
});
const port = Number(args.port);
const workers = Number(args.workers);
if (!Number.isInteger(port) || port < 1 || port > 65535 || !args['redis-socket'] ||
    !Number.isInteger(workers) || workers < 1) {
  console.error('usage: server.mjs --port P --redis-socket PATH [--workers N]');
  process.exit(2);
}

// KEYS: stock, buyers, orders; ARGV: user, order id, time (ms).
// Returns {code, remaining}.
const reserveScript = `
local stock = tonumber(redis.call('GET', KEYS[1]))
if not stock then return {-4, 0} end
if stock < 1 then return {-1, 0} end
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return {0, stock} end
local left = redis.call('DECRBY', KEYS[1], 1)
redis.call('XADD', KEYS[3], '*', 'o', ARGV[2], 'u', ARGV[1], 'q', '1', 't', ARGV[3])
return {1, left}
`;

const statusWords = new Map([
  [1, 'reserved'], [0, 'already_purchased'], [-1, 'sold_out'], [-4, 'unknown_activity'],
]);

// Order ids of flashsale's form: 26 Crockford base32 characters, 10 of time and 16 random.
const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
let pool = randomBytes(4096);
let poolAt = 0;
function orderId(nowMs) {
  let id = '';
  let t = nowMs;
  for (let i = 0; i < 10; i++) {
    id = alphabet[t % 32] + id;
    t = Math.floor(t / 32);
  }
  if (poolAt + 16 > pool.length) {
    pool = randomBytes(4096);
    poolAt = 0;
  }
  for (let i = 0; i < 16; i++) id += alphabet[pool[poolAt++] & 31];
  return id;
}

const activityPath = /^\/api\/v1\/activities\/([A-Za-z0-9_-]{1,64})\/purchase$/;

function send(res, status, body) {
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(body),
  });
  res.end(body);
}

function runWorker() {
  const redis = new Redis({ path: args['redis-socket'], enableAutoPipelining: true });
  redis.defineCommand('reserve', { numberOfKeys: 3, lua: reserveScript });
  redis.on('error', (error) => console.error(`node_peer: redis: ${error.message}`));

  const server = http.createServer((req, res) => {
    const match = req.method === 'POST' ? activityPath.exec(req.url) : null;
    if (!match) {
      send(res, 404, '{"status":"not_found","error":"POST /api/v1/activities/<id>/purchase"}');
      return;
    }
    const user = req.headers['x-user-id'];
    if (!user) {
      send(res, 401, '{"status":"unauthorized","error":"missing X-User-Id header"}');
      return;
    }
    req.resume();  // no body is read: a purchase of one unit
    const id = match[1];
    const now = Date.now();
    const order = orderId(now);
    const tag = `peer:{${id}}`;
    redis.reserve(`${tag}:stock`, `${tag}:buyers`, `${tag}:orders`, user, order, now).then(
      ([code, remaining]) => {
        const head = `{"code":${code},"status":"${statusWords.get(code) ?? 'unknown'}",` +
          `"activity_id":"${id}"`;
        if (code === 1) {
          send(res, 200, `${head},"order_id":"${order}","quantity":1,"items":[],` +
            `"remaining":${remaining},"replayed":false}`);
        } else {
          send(res, code === -4 ? 404 : 200, `${head}}`);
        }
      },
      (error) => {
        send(res, 503, JSON.stringify({ status: 'unavailable', error: error.message }));
      });
  });
  server.keepAliveTimeout = 60000;
  server.listen(port, '127.0.0.1');
}

if (cluster.isPrimary) {
  for (let i = 0; i < workers; i++) cluster.fork();
  let stopping = false;
  const stop = () => {
    stopping = true;
    for (const w of Object.values(cluster.workers)) w.kill('SIGTERM');
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  // A worker that dies is not replaced: a bench run with one worker short would mislead.
  cluster.on('exit', (worker, code, signal) => {
    if (!stopping) {
      console.error(`node_peer: worker ${worker.process.pid} exited (${signal ?? code})`);
      stop();
      process.exitCode = 1;
    }
  });
} else {
  runWorker();
}
