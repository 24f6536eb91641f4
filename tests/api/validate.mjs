// Validates recorded HTTP exchanges against api/openapi.json: every reply the HTTP integration
// tests received (one JSON line each: method, target, status, content_type, body; written by
// tests/support/http_client.cc when FLASHSALE_API_RECORD names the file) must be a documented
// response of its route: a documented status, a documented content type, and, for JSON, a body
// the response's schema accepts. A target no route matches must be a documented error body.
//
//   node validate.mjs <openapi.json> <exchanges.jsonl>
// Exits 0 when every exchange conforms, 1 naming each one that does not, 2 on bad input.
import { readFileSync } from "node:fs";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const [specPath, recordPath] = process.argv.slice(2);
if (!specPath || !recordPath) {
  console.error("usage: node validate.mjs <openapi.json> <exchanges.jsonl>");
  process.exit(2);
}
const spec = JSON.parse(readFileSync(specPath, "utf8"));
const lines = readFileSync(recordPath, "utf8").split("\n").filter((l) => l.trim() !== "");
if (lines.length === 0) {
  console.error(`${recordPath}: no exchanges recorded`);
  process.exit(2);
}

// OpenAPI 3.1 schemas are JSON Schema 2020-12; the document is added whole so that $refs such as
// #/components/schemas/Outcome resolve, and each response schema is reached by its JSON pointer.
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema(spec, "openapi.json");
const validators = new Map();
const pointer = (...parts) =>
  parts.map((p) => "/" + String(p).replaceAll("~", "~0").replaceAll("/", "~1")).join("");
function validatorAt(path) {
  if (!validators.has(path)) validators.set(path, ajv.compile({ $ref: `openapi.json#${path}` }));
  return validators.get(path);
}
function resolve(node) {
  while (node && node.$ref) {
    node = node.$ref
      .replace(/^#\//, "")
      .split("/")
      .map((p) => p.replaceAll("~1", "/").replaceAll("~0", "~"))
      .reduce((at, key) => at[key], spec);
  }
  return node;
}

// Path templates as regular expressions, literal paths first (so /api/v1/openapi.json is never
// taken for an activity).
const templates = Object.keys(spec.paths)
  .map((template) => ({
    template,
    literal: !template.includes("{"),
    regex: new RegExp("^" + template.replace(/\{[^}]+\}/g, "[^/]+") + "$"),
  }))
  .sort((a, b) => Number(b.literal) - Number(a.literal));

const failures = [];
const seen = new Set();
let checked = 0;
for (const [index, line] of lines.entries()) {
  const exchange = JSON.parse(line);
  const where = `#${index + 1} ${exchange.method} ${exchange.target} -> ${exchange.status}`;
  const fail = (why) => failures.push(`${where}: ${why}`);
  if (exchange.status === 0) continue;  // no reply (a test cut the connection on purpose)
  const path = exchange.target.split("?")[0];
  const method = exchange.method.toLowerCase();
  const match = templates.find((t) => t.regex.test(path));
  let responses;
  let schemaBase;
  if (match && spec.paths[match.template][method]) {
    responses = spec.paths[match.template][method].responses;
    schemaBase = ["paths", match.template, method, "responses"];
  } else if (exchange.status === 404 || exchange.status === 405 || exchange.status === 400) {
    // No route (or not this method): the generic error body.
    responses = { [exchange.status]: { $ref: "#/components/responses/BadRequest" } };
    schemaBase = null;
  } else {
    fail(`no documented route ${method.toUpperCase()} ${path}`);
    continue;
  }
  const declared = responses[String(exchange.status)] ?? responses.default;
  if (!declared) {
    fail(`status ${exchange.status} is not documented for ${match?.template ?? path}`);
    continue;
  }
  seen.add(`${method.toUpperCase()} ${match?.template ?? "(no route)"} ${exchange.status}`);
  const response = resolve(declared);
  const contents = response.content ?? {};
  const type = (exchange.content_type || "").split(";")[0].trim();
  if (Object.keys(contents).length === 0) {
    if (exchange.body !== "") fail(`a body where none is documented: ${exchange.body.slice(0, 200)}`);
    checked++;
    continue;
  }
  if (!contents[type]) {
    fail(`content type '${type}' is not documented (${Object.keys(contents).join(", ")})`);
    continue;
  }
  if (type !== "application/json") {
    checked++;
    continue;
  }
  let body;
  try {
    body = JSON.parse(exchange.body);
  } catch (error) {
    fail(`body is not JSON: ${exchange.body.slice(0, 200)}`);
    continue;
  }
  // The schema's pointer: through the components response when the route refers to one.
  const schemaPath = declared.$ref
    ? declared.$ref.replace(/^#/, "") + pointer("content", type, "schema")
    : pointer(...schemaBase, String(exchange.status) in responses ? exchange.status : "default",
              "content", type, "schema");
  const validate = validatorAt(schemaPath);
  if (!validate(body)) {
    fail(`body does not match ${schemaPath}: ${ajv.errorsText(validate.errors)}\n    ${exchange.body.slice(0, 300)}`);
    continue;
  }
  checked++;
}

console.log(`validate: ${checked} of ${lines.length} exchanges conform; ${seen.size} distinct route/status pairs`);
if (failures.length > 0) {
  console.log(`validate: ${failures.length} do not:`);
  for (const failure of failures.slice(0, 50)) console.log("  " + failure);
  process.exit(1);
}
