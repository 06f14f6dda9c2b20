import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parse as parseYaml, stringify } from 'yaml';
import { envBindings, loadConfig } from '../../../src/shared/config';
import { SECRET_VARIABLES } from '../../../src/shared/secret-files';
import { assertPrometheusBinary, prometheusFolder } from '../../support/prometheus-config';
import { useTempDirs } from '../../support/temp-dirs';
import {
  chartDir,
  find,
  GATEWAY_API,
  helm,
  type K8sObject,
  MONITORING_API,
  parseObjects,
  RELEASE,
  type RenderCase,
  template,
  typecheckObjects,
  validateObjects,
  valuesArgs,
  writeValues,
} from './chart-kit';

/**
 * Issue 52, parts 1-2: the Helm chart (deploy/helm/animal-store-gateway), checked offline. helm
 * lints and renders it for every values file and the edge cases below; every rendered object is
 * checked against the Kubernetes schemas (tsc over kubernetes-models' interfaces refuses unknown
 * fields; the models' validate() checks enums and patterns); values.schema.json refuses bad value
 * sets; the renderings are snapshots; the PrometheusRule is the repository's rules, promtool-checked.
 * No cluster is reachable here: docs/kubernetes.md says what this does not cover.
 */

const PRODUCTION = 'values-production.yaml';
const STAGING = 'values-staging.yaml';
const FULLNAME = `${RELEASE}-animal-store-gateway`;

const renderCases: RenderCase[] = [
  { name: 'defaults (values.yaml)', valuesFiles: [] },
  { name: 'production', valuesFiles: [PRODUCTION], apiVersions: [GATEWAY_API] },
  { name: 'production, monitoring CRDs present', valuesFiles: [PRODUCTION], apiVersions: [GATEWAY_API, MONITORING_API] },
  { name: 'staging, monitoring CRDs present', valuesFiles: [STAGING], apiVersions: [GATEWAY_API, MONITORING_API] },
  { name: 'production, autoscaling off', valuesFiles: [PRODUCTION], set: ['autoscaling.enabled=false', 'gateway.replicas=4'], apiVersions: [GATEWAY_API] },
  { name: 'defaults, httpRoute on', valuesFiles: [], set: ['httpRoute.enabled=true', 'httpRoute.parentRefs[0].name=public', 'httpRoute.hostnames[0]=api.example.test'], apiVersions: [GATEWAY_API] },
  { name: 'production, authz on', valuesFiles: [PRODUCTION], set: ['authz.enabled=true'], apiVersions: [GATEWAY_API] },
  {
    name: 'external inventory, data on a claim, no policy, PDB or service account',
    valuesFiles: [],
    set: ['inventory.enabled=false', 'inventory.upstreamUrl=http://inventory.example.svc:8090', 'gateway.dataVolume.existingClaim=asg-data', 'networkPolicy.enabled=false', 'podDisruptionBudget.enabled=false', 'serviceAccount.create=false'],
  },
];

/** Each case's rendering (helm template's stdout) and its objects, made once. */
const rendered = new Map<string, { text: string; objects: K8sObject[] }>();
function objectsOf(caseName: string): K8sObject[] {
  const found = rendered.get(caseName);
  if (!found) throw new Error(`case "${caseName}" did not render`);
  return found.objects;
}

beforeAll(() => {
  for (const c of renderCases) {
    const run = template(c);
    if (run.status !== 0) throw new Error(`helm template (${c.name}) failed: ${run.stderr}`);
    rendered.set(c.name, { text: run.stdout, objects: parseObjects(run.stdout) });
  }
});

const { tempDir } = useTempDirs('asg-chart-');

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the fields a test reads are checked by typecheckObjects
type Container = { name: string; env: Array<{ name: string; value?: string; valueFrom?: unknown }>; [field: string]: any };
function container(objects: K8sObject[], kind: 'Deployment' | 'StatefulSet'): Container {
  return find(objects, kind).spec.template.spec.containers[0] as Container;
}
function envOf(c: Container): Record<string, string> {
  return Object.fromEntries(c.env.map((e) => [e.name, e.value ?? '']));
}

/**
 * The rendering as snapshotted: the PrometheusRule's groups are config/prometheus/'s rules, checked
 * equal to those files below, so an edit of an alert changes no snapshot here.
 */
function withoutRuleGroups(rendering: string): string {
  return rendering.replace(/(kind: PrometheusRule\n[\s\S]*?\nspec:\n {2}groups:\n)[\s\S]*?(?=\n---\n|$)/, '$1    # config/prometheus/recording-rules.yml and alert-rules.yml (checked equal below)\n');
}

describe('helm lint --strict and helm template', () => {
  it.each(renderCases.map((c) => [c.name, c] as const))('lint --strict passes: %s', (_name, c) => {
    const run = helm(['lint', '--strict', chartDir, ...valuesArgs(c)]);
    expect({ status: run.status, errors: run.stdout.split('\n').filter((line) => /\[(ERROR|WARNING)\]/.test(line)) }).toEqual({ status: 0, errors: [] });
  });

  it.each(renderCases.map((c) => [c.name] as const))('renders as the committed snapshot: %s', (name) => {
    expect(withoutRuleGroups(rendered.get(name)!.text)).toMatchSnapshot();
  });

  it('renders the kinds each case asks for, and no Secret ever', () => {
    const kinds = (name: string) => objectsOf(name).map((o) => o.kind).sort();
    const base = ['ConfigMap', 'Deployment', 'NetworkPolicy', 'NetworkPolicy', 'PodDisruptionBudget', 'Service', 'Service', 'Service', 'ServiceAccount', 'StatefulSet'];
    expect(kinds('defaults (values.yaml)')).toEqual([...base, 'HorizontalPodAutoscaler'].sort());
    expect(kinds('production')).toEqual([...base, 'HTTPRoute', 'HorizontalPodAutoscaler'].sort());
    expect(kinds('production, monitoring CRDs present')).toEqual([...base, 'HTTPRoute', 'HorizontalPodAutoscaler', 'PrometheusRule', 'ServiceMonitor', 'ServiceMonitor'].sort());
    // Staging leaves the rules to production's release (they select by environment) and runs no autoscaler.
    expect(kinds('staging, monitoring CRDs present')).toEqual([...base, 'HTTPRoute', 'ServiceMonitor', 'ServiceMonitor'].sort());
    expect(kinds('production, autoscaling off')).toEqual([...base, 'HTTPRoute'].sort());
    expect(kinds('production, authz on')).toEqual([...base, 'HTTPRoute', 'HorizontalPodAutoscaler', 'Service'].sort());
    expect(kinds('external inventory, data on a claim, no policy, PDB or service account')).toEqual(['ConfigMap', 'Deployment', 'HorizontalPodAutoscaler', 'Service', 'Service']);
  });

  it('without the Gateway API, httpRoute.enabled stops the rendering with a line saying what is missing', () => {
    const run = template({ name: 'production without the Gateway API', valuesFiles: [PRODUCTION] });
    expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 1, stderr: expect.stringContaining('httpRoute.enabled needs the Gateway API (gateway.networking.k8s.io/v1 HTTPRoute)') });
  });
});

describe('every rendered object against the Kubernetes schemas', () => {
  const everyObject = () => renderCases.flatMap((c) => objectsOf(c.name).map((object) => ({ label: `${c.name}: ${object.kind}/${object.metadata.name}`, object })));

  it('fits its kind (tsc over kubernetes-models: unknown fields refused, types and required fields checked)', () => {
    expect(typecheckObjects(everyObject())).toBe('');
  });

  it('passes its kind\'s JSON schema (kubernetes-models validate(): enums, patterns, formats)', () => {
    expect(validateObjects(everyObject())).toEqual([]);
  });

  it('and the checks refuse an unknown field, a wrong type and a missing required field', () => {
    const objects = objectsOf('production, monitoring CRDs present');
    const deployment = structuredClone(find(objects, 'Deployment'));
    deployment.spec.template.spec.containers[0].livenessProbe.httpGet.pth = '/healthz';
    const hpa = structuredClone(find(objects, 'HorizontalPodAutoscaler'));
    hpa.spec.maxReplicas = 'twelve';
    const statefulSet = structuredClone(find(objects, 'StatefulSet'));
    delete statefulSet.spec.selector;
    const monitor = structuredClone(find(objects, 'ServiceMonitor'));
    monitor.spec.endpoints[0].scrapeInterval = '15s';
    const diagnostics = typecheckObjects([
      { label: 'unknown field', object: deployment },
      { label: 'wrong type', object: hpa },
      { label: 'missing field', object: statefulSet },
      { label: 'unknown CRD field', object: monitor },
    ]);
    expect(diagnostics).toMatch(/unknown field \(line \d+\): error TS2353: .*'"pth"' does not exist in type 'IHTTPGetAction'/);
    expect(diagnostics).toMatch(/wrong type \(line \d+\): error TS2322/);
    expect(diagnostics).toMatch(/missing field \(line \d+\): error TS2741: Property '"selector"' is missing/);
    expect(diagnostics).toMatch(/unknown CRD field \(line \d+\): error TS2353: .*'"scrapeInterval"' does not exist/);
  });

  it('and validate() refuses a value outside its kind\'s enum (an HTTPRoute path type)', () => {
    const route = structuredClone(find(objectsOf('production'), 'HTTPRoute'));
    route.spec.rules[0].matches[0].path.type = 'Prefix';
    expect(validateObjects([{ label: 'bad path type', object: route }])).toEqual([expect.stringMatching(/^bad path type: .*path\/type must be equal to one of the allowed values/)]);
  });
});

describe('what the chart promises', () => {
  it.each([
    ['1500m', 1],
    ['2', 2],
    ['0.5', 1],
    ['2500m', 2],
    ['4', 4],
  ])('WORKERS comes from the CPU request: %s gives %i', (cpu, workers) => {
    const run = template({ name: `cpu ${cpu}`, valuesFiles: [], set: [`gateway.resources.requests.cpu=${cpu}`] }, ['--show-only', 'templates/gateway-deployment.yaml']);
    expect(run.status).toBe(0);
    expect(envOf(container(parseObjects(run.stdout), 'Deployment')).WORKERS).toBe(String(workers));
  });

  it('probes /healthz (liveness) and /readyz (readiness) on the admin port, the inventory on its own', () => {
    const objects = objectsOf('production');
    const gateway = container(objects, 'Deployment');
    const adminPort = gateway.ports.find((p: { name: string }) => p.name === 'admin');
    expect(adminPort.containerPort).toBe(Number(envOf(gateway).ADMIN_PORT));
    expect(envOf(gateway).ADMIN_HOST).toBe('0.0.0.0');
    expect(gateway.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'admin' });
    expect(gateway.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'admin' });
    expect(gateway.startupProbe.httpGet).toEqual({ path: '/healthz', port: 'admin' });
    const inventory = container(objects, 'StatefulSet');
    expect(inventory.command).toEqual(['node', 'dist/inventory/main.js']);
    expect(inventory.ports).toEqual([{ name: 'http', containerPort: Number(envOf(inventory).INVENTORY_PORT), protocol: 'TCP' }]);
    expect(inventory.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(inventory.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
  });

  it('runs both as uid 1000 on a read-only root file system, writing only DATA_DIR and /tmp', () => {
    const objects = objectsOf('production');
    for (const kind of ['Deployment', 'StatefulSet'] as const) {
      const pod = find(objects, kind).spec.template.spec;
      expect({ kind, pod: pod.securityContext }).toEqual({ kind, pod: expect.objectContaining({ runAsNonRoot: true, runAsUser: 1000, fsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' } }) });
      const c = pod.containers[0];
      expect({ kind, container: c.securityContext }).toEqual({
        kind,
        container: expect.objectContaining({ runAsNonRoot: true, runAsUser: 1000, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, privileged: false, capabilities: { drop: ['ALL'] } }),
      });
      const writable = c.volumeMounts.filter((m: { readOnly?: boolean }) => !m.readOnly).map((m: { mountPath: string }) => m.mountPath).sort();
      expect({ kind, writable }).toEqual({ kind, writable: ['/data', '/tmp'] });
      expect(envOf(c).DATA_DIR).toBe('/data');
    }
    const inventory = find(objects, 'StatefulSet');
    expect(inventory.spec.volumeClaimTemplates.map((t: K8sObject) => t.metadata.name)).toEqual(['data']);
    expect(inventory.spec.replicas).toBe(1);
    const gatewayVolumes = find(objects, 'Deployment').spec.template.spec.volumes;
    expect(gatewayVolumes.find((v: { name: string }) => v.name === 'data')).toEqual({ name: 'data', emptyDir: { sizeLimit: '1Gi' } });
    const claimed = find(objectsOf('external inventory, data on a claim, no policy, PDB or service account'), 'Deployment').spec.template.spec.volumes;
    expect(claimed.find((v: { name: string }) => v.name === 'data')).toEqual({ name: 'data', persistentVolumeClaim: { claimName: 'asg-data' } });
  });

  it('takes secrets only by reference: files from the named Secrets, read through <NAME>_FILE, no value anywhere', () => {
    const objects = objectsOf('production');
    const text = rendered.get('production')!.text;
    expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
    const gateway = container(objects, 'Deployment');
    const env = envOf(gateway);
    for (const name of SECRET_VARIABLES) expect({ name, set: name in env }).toEqual({ name, set: false });
    expect(gateway.env.filter((e: { valueFrom?: unknown }) => e.valueFrom)).toEqual([]);
    expect({ ADMIN_TOKEN_FILE: env.ADMIN_TOKEN_FILE, SIGNING_SECRET_FILE: env.SIGNING_SECRET_FILE, REDIS_PASSWORD_FILE: env.REDIS_PASSWORD_FILE }).toEqual({
      ADMIN_TOKEN_FILE: '/run/secrets/asg/admin-token',
      SIGNING_SECRET_FILE: '/run/secrets/asg/signing-secret',
      REDIS_PASSWORD_FILE: '/run/secrets/asg/redis-password',
    });
    const volumes = find(objects, 'Deployment').spec.template.spec.volumes;
    // 0440: the files are readable by the pod's group (fsGroup 1000), by no one else.
    expect(volumes.find((v: { name: string }) => v.name === 'secrets').projected.defaultMode).toBe(0o440);
    expect(volumes.find((v: { name: string }) => v.name === 'secrets').projected.sources).toEqual([
      { secret: { name: 'asg-production-secrets', items: [{ key: 'admin-token', path: 'admin-token' }, { key: 'signing-secret', path: 'signing-secret' }] } },
      { secret: { name: 'asg-production-redis', items: [{ key: 'redis-password', path: 'redis-password' }] } },
    ]);
    expect(gateway.volumeMounts).toContainEqual({ name: 'secrets', mountPath: '/run/secrets/asg', readOnly: true });
    // The inventory gets the signing secret alone.
    const inventoryVolumes = find(objects, 'StatefulSet').spec.template.spec.volumes;
    expect(inventoryVolumes.find((v: { name: string }) => v.name === 'secrets').projected.sources).toEqual([
      { secret: { name: 'asg-production-secrets', items: [{ key: 'signing-secret', path: 'signing-secret' }] } },
    ]);
    expect(Object.keys(envOf(container(objects, 'StatefulSet'))).filter((n) => /TOKEN|PASSWORD|REDIS/.test(n))).toEqual([]);
    // No password in the Redis URL.
    expect(env.REDIS_URL).toBe('redis://asg-prod@redis.animal-store.svc.cluster.local:6379/0');
    expect(text).not.toMatch(/redis:\/\/[^@\s]*:[^@\s]*@/);
  });

  it('during a signing-secret rotation gives the inventory the previous secret(s) from the same Secret, as a file', () => {
    const run = template({ name: 'rotation', valuesFiles: [PRODUCTION], set: ['secrets.signingPreviousSecretsKey=signing-previous'], apiVersions: [GATEWAY_API] });
    expect(run.status).toBe(0);
    const objects = parseObjects(run.stdout);
    expect(envOf(container(objects, 'StatefulSet')).SIGNING_PREVIOUS_SECRETS_FILE).toBe('/run/secrets/asg/signing-previous-secrets');
    expect(find(objects, 'StatefulSet').spec.template.spec.volumes.find((v: { name: string }) => v.name === 'secrets').projected.sources).toEqual([
      { secret: { name: 'asg-production-secrets', items: [{ key: 'signing-secret', path: 'signing-secret' }, { key: 'signing-previous', path: 'signing-previous-secrets' }] } },
    ]);
    expect('SIGNING_PREVIOUS_SECRETS_FILE' in envOf(container(objects, 'Deployment'))).toBe(false);
  });

  it('sets only variables the product reads (CONTRACT §2), and its config loads in the product for both instances', () => {
    const known = new Set([...envBindings.map((b) => b.variable), ...SECRET_VARIABLES.map((name) => `${name}_FILE`), 'CONFIG_FILE', 'AUTHZ_PORT']);
    for (const [caseName, environment] of [
      ['production', 'production'],
      ['staging, monitoring CRDs present', 'staging'],
      ['production, authz on', 'production'],
    ] as const) {
      const objects = objectsOf(caseName);
      const dir = tempDir();
      const configFile = path.join(dir, 'config.yaml');
      fs.writeFileSync(configFile, find(objects, 'ConfigMap').data!['config.yaml']!);
      const secretFile = path.join(dir, 'secret');
      fs.writeFileSync(secretFile, `${'s'.repeat(40)}\n`);
      for (const [kind, role] of [
        ['Deployment', 'gateway'],
        ['StatefulSet', 'inventory'],
      ] as const) {
        const env = envOf(container(objects, kind));
        for (const variable of Object.keys(env)) expect({ caseName, variable, known: known.has(variable) }).toEqual({ caseName, variable, known: true });
        const local = Object.fromEntries(Object.entries(env).map(([k, v]) => [k, k === 'CONFIG_FILE' ? configFile : k.endsWith('_FILE') ? secretFile : v]));
        const config = loadConfig({ env: local, role });
        expect({ caseName, role, env: config.env, dataDir: config.dataDir }).toEqual({ caseName, role, env: environment, dataDir: '/data' });
        if (role === 'gateway') {
          expect({ caseName, redis: config.redis.url, workers: config.workers, upstream: config.upstream.url }).toEqual({
            caseName,
            redis: env.REDIS_URL,
            workers: Number(env.WORKERS),
            upstream: `http://${FULLNAME}-inventory:8090`,
          });
        }
      }
    }
  });

  it('gives each values file the APP_ENV, host and public URL of its config/<environment>.yaml', () => {
    for (const [file, environment] of [
      [PRODUCTION, 'production'],
      [STAGING, 'staging'],
    ] as const) {
      const values = parseYaml(fs.readFileSync(path.join(chartDir, file), 'utf8')) as { environment: string; publicBaseUrl: string; httpRoute: { hostnames: string[] } };
      const envConfig = parseYaml(fs.readFileSync(path.join(chartDir, '..', '..', '..', 'config', `${environment}.yaml`), 'utf8')) as { server: { publicBaseUrl: string } };
      expect({ file, environment: values.environment, url: values.publicBaseUrl, hosts: values.httpRoute.hostnames }).toEqual({
        file,
        environment,
        url: envConfig.server.publicBaseUrl,
        hosts: [new URL(envConfig.server.publicBaseUrl).host],
      });
    }
  });

  it('keeps the admin port off the public path: public Service and route carry the public port only; the policy admits adminFrom alone to it', () => {
    const objects = objectsOf('production, authz on');
    const services = objects.filter((o) => o.kind === 'Service');
    const byName = (name: string) => services.find((s) => s.metadata.name === name)!;
    expect(byName(FULLNAME).spec.ports).toEqual([{ name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' }]);
    expect(byName(`${FULLNAME}-admin`).spec).toEqual(expect.objectContaining({ type: 'ClusterIP', ports: [{ name: 'admin', port: 8081, targetPort: 'admin', protocol: 'TCP' }] }));
    expect(byName(`${FULLNAME}-authz`).spec.ports).toEqual([{ name: 'authz', port: 8082, targetPort: 'authz', protocol: 'TCP' }]);
    expect(find(objects, 'HTTPRoute').spec.rules.flatMap((r: { backendRefs: unknown[] }) => r.backendRefs)).toEqual([{ name: FULLNAME, port: 80 }]);

    const values = parseYaml(fs.readFileSync(path.join(chartDir, PRODUCTION), 'utf8')) as { networkPolicy: { adminFrom: unknown[] } };
    const policy = find(objects, 'NetworkPolicy', FULLNAME);
    expect(policy.spec.policyTypes).toEqual(['Ingress']);
    const rules = policy.spec.ingress as Array<{ ports: Array<{ port: string }>; from?: unknown[] }>;
    expect(rules.map((r) => r.ports.map((p) => p.port))).toEqual([['http'], ['admin'], ['authz']]);
    expect(rules[0]!.from).toBeUndefined();
    expect(rules[1]!.from).toEqual(values.networkPolicy.adminFrom);
    expect(rules[2]!.from).toEqual([{ podSelector: {} }]);
    const inventoryPolicy = find(objects, 'NetworkPolicy', `${FULLNAME}-inventory`);
    expect(inventoryPolicy.spec.ingress).toEqual([
      {
        ports: [{ port: 'http', protocol: 'TCP' }],
        from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'animal-store-gateway', 'app.kubernetes.io/instance': RELEASE, 'app.kubernetes.io/component': 'gateway' } } }, ...values.networkPolicy.adminFrom],
      },
    ]);
  });

  it('opens the decision listener only when authz is on: port, AUTHZ_PORT, Service', () => {
    const on = container(objectsOf('production, authz on'), 'Deployment');
    expect(on.ports.map((p: { name: string; containerPort: number }) => [p.name, p.containerPort])).toEqual([['http', 8080], ['admin', 8081], ['authz', 8082]]);
    expect(envOf(on).AUTHZ_PORT).toBe('8082');
    const off = container(objectsOf('production'), 'Deployment');
    expect(off.ports.map((p: { name: string }) => p.name)).toEqual(['http', 'admin']);
    expect('AUTHZ_PORT' in envOf(off)).toBe(false);
  });

  it('names its config file by CONFIG_FILE, mounted from the ConfigMap, and rolls the pods when the config changes', () => {
    const objects = objectsOf('production');
    const gateway = container(objects, 'Deployment');
    expect(envOf(gateway).CONFIG_FILE).toBe('/etc/asg/config.yaml');
    expect(gateway.volumeMounts).toContainEqual({ name: 'config', mountPath: '/etc/asg', readOnly: true });
    const configMap = find(objects, 'ConfigMap');
    expect(parseYaml(configMap.data!['config.yaml']!)).toEqual({ server: { trustedProxies: ['10.0.0.0/8'] } });
    const checksum = (set: string[]) =>
      find(parseObjects(template({ name: 'checksum', valuesFiles: [PRODUCTION], set, apiVersions: [GATEWAY_API] }).stdout), 'Deployment').spec.template.metadata.annotations['checksum/config'];
    expect(checksum(['config.logLevel=warn'])).not.toBe(checksum([]));
  });

  it('scales with an HPA on the CPU request and keeps all but one pod through a disruption', () => {
    const objects = objectsOf('production');
    expect(find(objects, 'HorizontalPodAutoscaler').spec).toEqual(
      expect.objectContaining({ minReplicas: 3, maxReplicas: 12, scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: FULLNAME } }),
    );
    expect('replicas' in find(objects, 'Deployment').spec).toBe(false);
    expect(find(objectsOf('production, autoscaling off'), 'Deployment').spec.replicas).toBe(4);
    expect(find(objects, 'PodDisruptionBudget').spec).toEqual({ maxUnavailable: 1, selector: find(objects, 'Deployment').spec.selector });
    // values-production.yaml's spread names no selector: the chart fills in this release's gateway pods.
    expect(find(objects, 'Deployment').spec.template.spec.topologySpreadConstraints).toEqual([
      { maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'ScheduleAnyway', labelSelector: find(objects, 'Deployment').spec.selector },
    ]);
  });

  it('scrapes both listeners as job gateway and job inventory with the environment label the rules use', () => {
    const objects = objectsOf('staging, monitoring CRDs present');
    const monitors = objects.filter((o) => o.kind === 'ServiceMonitor');
    const services = objects.filter((o) => o.kind === 'Service');
    const selected = (monitor: K8sObject) =>
      services.filter((s) => Object.entries(monitor.spec.selector.matchLabels as Record<string, string>).every(([k, v]) => s.metadata.labels?.[k] === v)).map((s) => s.metadata.name);
    expect(monitors.map((m) => [selected(m), m.spec.endpoints.map((e: { port: string; relabelings: unknown }) => [e.port, e.relabelings])])).toEqual([
      [[`${FULLNAME}-admin`], [['admin', [{ action: 'replace', targetLabel: 'job', replacement: 'gateway' }, { action: 'replace', targetLabel: 'environment', replacement: 'staging' }]]]],
      [[`${FULLNAME}-inventory`], [['http', [{ action: 'replace', targetLabel: 'job', replacement: 'inventory' }, { action: 'replace', targetLabel: 'environment', replacement: 'staging' }]]]],
    ]);
  });
});

describe('the PrometheusRule: the repository\'s rules, one copy', () => {
  const ruleFiles = ['recording-rules.yml', 'alert-rules.yml'];

  it('reads config/prometheus/ through files/prometheus/ (symbolic links, so the two cannot differ)', () => {
    for (const file of ruleFiles) {
      const inChart = path.join(chartDir, 'files', 'prometheus', file);
      expect({ file, target: fs.realpathSync(inChart) }).toEqual({ file, target: fs.realpathSync(path.join(prometheusFolder, file)) });
      expect(fs.readFileSync(inChart, 'utf8')).toBe(fs.readFileSync(path.join(prometheusFolder, file), 'utf8'));
    }
  });

  it('carries every group of recording-rules.yml and alert-rules.yml as they are', () => {
    const rule = find(objectsOf('production, monitoring CRDs present'), 'PrometheusRule');
    const groups = ruleFiles.flatMap((file) => (parseYaml(fs.readFileSync(path.join(prometheusFolder, file), 'utf8')) as { groups: unknown[] }).groups);
    expect(rule.spec.groups).toEqual(groups);
  });

  it('passes promtool check rules', () => {
    assertPrometheusBinary('promtool');
    const rule = find(objectsOf('production, monitoring CRDs present'), 'PrometheusRule');
    const file = path.join(tempDir(), 'prometheusrule.yml');
    fs.writeFileSync(file, stringify({ groups: rule.spec.groups }));
    const check = spawnSync('promtool', ['check', 'rules', file], { encoding: 'utf8' });
    expect({ status: check.status, output: `${check.stdout}${check.stderr}` }).toEqual({ status: 0, output: expect.stringContaining('SUCCESS') });
  });
});

/** Bad value sets over values-production.yaml, each with the schema path its refusal names. */
const badValues: Array<[string, Record<string, unknown>, string]> = [
  ['an APP_ENV the product does not run as', { environment: 'development' }, "at '/environment'"],
  ['a secret value beside the references (secrets.adminToken)', { secrets: { adminToken: 'a'.repeat(40) } }, "additional properties 'adminToken' not allowed"],
  ['a password inside redis.url', { redis: { url: 'redis://asg-prod:hunter2@redis:6379/0' } }, "at '/redis/url'"],
  ['a REDIS_URL that is not redis:// or rediss://', { redis: { url: 'http://redis:6379' } }, "at '/redis/url'"],
  ['the admin token in config', { config: { admin: { token: 'a'.repeat(40) } } }, "at '/config/admin/token'"],
  ['the signing secret in config', { config: { signing: { secret: 's'.repeat(40) } } }, "at '/config/signing/secret'"],
  ['the Redis password in config', { config: { redis: { password: 'hunter2' } } }, "at '/config/redis/password'"],
  ['a webhook secret in config (secretFile is the way)', { config: { notifications: { webhooks: [{ url: 'https://hooks.example/asg', secret: 'whsec_c2VjcmV0' }] } } }, "at '/config/notifications/webhooks/0/secret'"],
  ['a secret as a plain environment variable', { gateway: { extraEnv: [{ name: 'ADMIN_TOKEN', value: 'a'.repeat(40) }] } }, "at '/gateway/extraEnv/0/name'"],
  ['a variable the chart sets itself (WORKERS)', { gateway: { extraEnv: [{ name: 'WORKERS', value: '8' }] } }, "at '/gateway/extraEnv/0/name'"],
  ['workers in config (WORKERS comes from the CPU request)', { config: { workers: 4 } }, "at '/config/workers'"],
  ['no CPU request', { gateway: { resources: { requests: { cpu: null } } } }, "missing property 'cpu'"],
  ['a CPU request that is not a quantity', { gateway: { resources: { requests: { cpu: 'two' } } } }, "at '/gateway/resources/requests/cpu'"],
  ['an empty adminFrom (it would admit everyone to the admin port)', { networkPolicy: { adminFrom: [] } }, "at '/networkPolicy/adminFrom'"],
  ['an authz port that is another listener\'s', { authz: { enabled: true, port: 8081 } }, "at '/authz/port'"],
  ['an HTTPRoute with no parent', { httpRoute: { enabled: true, parentRefs: [] } }, "at '/httpRoute/parentRefs'"],
  ['an external inventory with no URL', { inventory: { enabled: false, upstreamUrl: '' } }, "at '/inventory/upstreamUrl'"],
  ['a key the chart does not have (ingress)', { ingress: { enabled: true } }, "additional properties 'ingress' not allowed"],
  ['an autoscaler that may scale to zero', { autoscaling: { minReplicas: 0 } }, "at '/autoscaling/minReplicas'"],
  ['a grace period shorter than the drain (server.shutdownTimeoutMs, 10 s)', { gateway: { terminationGracePeriodSeconds: 5 } }, "at '/gateway/terminationGracePeriodSeconds'"],
  ['a pull policy Kubernetes does not have', { image: { pullPolicy: 'Sometimes' } }, "at '/image/pullPolicy'"],
  ['a public Service type Kubernetes does not have', { service: { public: { type: 'Public' } } }, "at '/service/public/type'"],
];

describe('values.schema.json refuses', () => {
  it.each(badValues)('%s', (name, values, named) => {
    const file = writeValues(tempDir(), name, values);
    const run = template({ name, valuesFiles: [PRODUCTION, file], apiVersions: [GATEWAY_API] });
    expect({ status: run.status, stderr: run.stderr }).toEqual({
      status: 1,
      stderr: expect.stringMatching(new RegExp(`values don't meet the specifications of the schema[\\s\\S]*${named.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`)),
    });
  });

  it('and helm lint --strict fails on such a values file too (the CI gate)', () => {
    const file = writeValues(tempDir(), 'lint', { redis: { url: 'redis://asg-prod:hunter2@redis:6379/0' } });
    const run = helm(['lint', '--strict', chartDir, ...valuesArgs({ valuesFiles: [PRODUCTION, file] })]);
    expect({ status: run.status, out: run.stdout }).toEqual({ status: 1, out: expect.stringContaining("at '/redis/url'") });
  });
});
