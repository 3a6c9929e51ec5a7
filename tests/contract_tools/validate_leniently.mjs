// Validates an answer of the API against its schema in schemas/, leniently: every field
// the schema names is checked, and fields it does not name are allowed, so that a later
// release that adds one does not break the client. (The files forbid unknown fields,
// additionalProperties: false, so that the service's own tests catch a field that
// should not be sent.) ajv 2020-12 in strict mode, with the standard formats.
// Usage: node validate_leniently.mjs SCHEMAS_DIR SCHEMA < answer.json
//   e.g. SCHEMA = response_user.json, or response_bodies.json#/$defs/sessions
import fs from 'node:fs';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

function lenient(schema) {
  if (Array.isArray(schema)) {
    return schema.map(lenient);
  }
  if (schema === null || typeof schema !== 'object') {
    return schema;
  }
  return Object.fromEntries(
    Object.entries(schema)
      .filter(([key, value]) => !(key === 'additionalProperties' && value === false))
      .map(([key, value]) => [key, lenient(value)]),
  );
}

const [dir, ref] = process.argv.slice(2);
const ajv = new Ajv2020({ strict: true, allowUnionTypes: true });
addFormats(ajv);
for (const name of fs.readdirSync(dir).filter((file) => file.endsWith('.json'))) {
  ajv.addSchema(lenient(JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8'))));
}
const validate = ajv.getSchema(ref);
if (validate(JSON.parse(fs.readFileSync(0, 'utf8')))) {
  console.log('valid');
} else {
  console.log(JSON.stringify(validate.errors));
  process.exitCode = 1;
}
