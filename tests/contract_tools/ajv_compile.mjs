// Compiles every file of schemas/ as a client team would: ajv 2020-12 in strict mode
// (an unknown keyword or format is an error, and so are loose types and required
// properties a schema does not define; union types such as ["string", "null"] are
// allowed), with ajv-formats for the standard formats. Prints one line per schema and
// exits 1 when any does not compile.
// Usage: node ajv_compile.mjs SCHEMAS_DIR
import fs from 'node:fs';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const dir = process.argv[2];
const ajv = new Ajv2020({ strict: true, allowUnionTypes: true });
addFormats(ajv);
const schemas = fs
  .readdirSync(dir)
  .filter((name) => name.endsWith('.json'))
  .sort()
  .map((name) => [name, JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8'))]);
for (const [, schema] of schemas) {
  ajv.addSchema(schema);
}
// Each file, and each entry of its $defs (a file of definitions has no root schema).
for (const [name, schema] of schemas) {
  const refs = [name, ...Object.keys(schema.$defs || {}).map((key) => `${name}#/$defs/${key}`)];
  for (const ref of refs) {
    try {
      ajv.getSchema(ref);
      console.log(`compiled ${ref}`);
    } catch (error) {
      console.log(`FAILED ${ref}: ${error.message}`);
      process.exitCode = 1;
    }
  }
}
