import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface TestCertificates {
  dir: string;
  caCert: string;
  /** A CA that signed nothing here: verifying the server with it must fail. */
  otherCaCert: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
}

function openssl(args: string[], cwd: string): void {
  try {
    execFileSync('openssl', args, { cwd, stdio: 'pipe' });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: Buffer };
    if (e.code === 'ENOENT')
      throw new Error('openssl is not on PATH: install it (Debian: apt-get install openssl) to run the TLS tests', {
        cause: err,
      });
    throw new Error(`openssl ${args[0]} failed: ${e.stderr?.toString() ?? e.message}`, { cause: err });
  }
}

/**
 * A CA, a server certificate for 127.0.0.1 and localhost signed by it, and a client certificate:
 * made fresh per run. `validDays` and `serverExtensions` (more openssl extension lines) let a
 * scanner's test give the server a certificate as a real one is: months of validity, a CRL URI.
 */
export function makeTestCertificates(
  options: { validDays?: number; serverExtensions?: string } = {},
): TestCertificates {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'asg-tls-'));
  const days = ['-days', String(options.validDays ?? 2)];
  for (const ca of ['ca', 'other-ca']) {
    openssl(
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        `${ca}.key`,
        '-out',
        `${ca}.crt`,
        ...days,
        '-subj',
        `/CN=asg test ${ca}`,
      ],
      dir,
    );
  }
  fs.writeFileSync(
    path.join(dir, 'server.ext'),
    `subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n${options.serverExtensions ?? ''}`,
  );
  fs.writeFileSync(path.join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\n');
  for (const leaf of ['server', 'client']) {
    openssl(
      [
        'req',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        `${leaf}.key`,
        '-out',
        `${leaf}.csr`,
        '-subj',
        `/CN=asg test ${leaf}`,
      ],
      dir,
    );
    openssl(
      [
        'x509',
        '-req',
        '-in',
        `${leaf}.csr`,
        '-CA',
        'ca.crt',
        '-CAkey',
        'ca.key',
        '-CAcreateserial',
        '-out',
        `${leaf}.crt`,
        ...days,
        '-extfile',
        `${leaf}.ext`,
      ],
      dir,
    );
  }
  const at = (name: string) => path.join(dir, name);
  return {
    dir,
    caCert: at('ca.crt'),
    otherCaCert: at('other-ca.crt'),
    serverCert: at('server.crt'),
    serverKey: at('server.key'),
    clientCert: at('client.crt'),
    clientKey: at('client.key'),
  };
}

/** redis-server arguments for a TLS listener on `port` (beside its plain one, which the tests use to look inside). */
export function redisTlsArgs(
  certs: TestCertificates,
  port: number,
  { requireClientCert }: { requireClientCert: boolean },
): string[] {
  return [
    '--tls-port',
    String(port),
    '--tls-cert-file',
    certs.serverCert,
    '--tls-key-file',
    certs.serverKey,
    '--tls-ca-cert-file',
    certs.caCert,
    '--tls-auth-clients',
    requireClientCert ? 'yes' : 'no',
  ];
}
