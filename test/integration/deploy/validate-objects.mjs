// Validates rendered Kubernetes objects with kubernetes-models (and its CRD packages): each model's
// validate() checks the kind's JSON schema. Run by chart-kit.ts in a child Node (the models are ES
// modules; Jest loads CommonJS). Argument: a JSON file of [{label, module, object}]. Prints a JSON
// array of refusals, one line per refused object.
import fs from 'node:fs';

const objects = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const refusals = [];
for (const { label, module, object } of objects) {
  let Model;
  try {
    Model = (await import(module))[object.kind];
  } catch (err) {
    refusals.push(`${label}: no model for ${object.apiVersion} ${object.kind} (${err.message})`);
    continue;
  }
  try {
    new Model(object).validate();
  } catch (err) {
    refusals.push(`${label}: ${err.message.split('\n').slice(0, 5).join(' / ')}`);
  }
}
process.stdout.write(JSON.stringify(refusals));
