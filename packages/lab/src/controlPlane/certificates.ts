// A throwaway PKI for the local control plane, made with the openssl CLI: one CA, the apiserver's
// serving certificate, client certificates per component, and the service-account signing key.
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface ClientIdentity {
  /** File stem, e.g. "admin" gives admin.crt and admin.key. */
  name: string;
  /** Kubernetes user name (certificate CN). */
  user: string;
  /** Kubernetes groups (certificate O). */
  groups: string[];
}

export interface Pki {
  caCert: string;
  caKey: string;
  servingCert: string;
  servingKey: string;
  serviceAccountKey: string;
  serviceAccountPub: string;
  clients: Record<string, { cert: string; key: string }>;
}

async function openssl(args: string[], cwd: string): Promise<void> {
  try {
    await run("openssl", args, { cwd });
  } catch (err) {
    const e = err as { stderr?: string; code?: string };
    if (e.code === "ENOENT") {
      throw new Error("openssl is not installed: run scripts/bootstrap.sh (Debian package openssl)", {
        cause: err,
      });
    }
    throw new Error(`openssl ${args[0]} failed: ${e.stderr ?? String(err)}`, { cause: err });
  }
}

// EC keys: generating them takes milliseconds, RSA would take seconds per key.
async function key(dir: string, name: string): Promise<string> {
  await openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", `${name}.key`], dir);
  return join(dir, `${name}.key`);
}

async function signed(
  dir: string,
  name: string,
  subject: string,
  extensions: string,
): Promise<{ cert: string; key: string }> {
  const keyPath = await key(dir, name);
  await writeFile(join(dir, `${name}.ext`), extensions);
  await openssl(["req", "-new", "-key", `${name}.key`, "-subj", subject, "-out", `${name}.csr`], dir);
  // A random serial (RFC 5280: positive, at most 20 octets) instead of openssl's ca.srl file, which
  // certificates signed at the same time (the lab's nodes join in parallel) would race on.
  const serial = randomBytes(16);
  serial[0]! &= 0x7f;
  await openssl(
    ["x509", "-req", "-in", `${name}.csr`, "-CA", "ca.crt", "-CAkey", "ca.key"].concat([
      "-set_serial",
      `0x${serial.toString("hex")}`,
      "-days",
      "30",
      "-sha256",
      "-extfile",
      `${name}.ext`,
      "-out",
      `${name}.crt`,
    ]),
    dir,
  );
  return { cert: join(dir, `${name}.crt`), key: keyPath };
}

export async function makePki(dir: string, serverNames: string[], clients: ClientIdentity[]): Promise<Pki> {
  await key(dir, "ca");
  await openssl(
    [
      "req",
      "-x509",
      "-new",
      "-key",
      "ca.key",
      "-subj",
      "/CN=portable-lb-test-ca",
      "-days",
      "30",
      "-out",
      "ca.crt",
    ],
    dir,
  );
  const san = serverNames.map((n) => (/^[\d.]+$|:/.test(n) ? `IP:${n}` : `DNS:${n}`)).join(",");
  const serving = await signed(
    dir,
    "apiserver",
    "/CN=kube-apiserver",
    `basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=${san}\n`,
  );
  const result: Pki = {
    caCert: join(dir, "ca.crt"),
    caKey: join(dir, "ca.key"),
    servingCert: serving.cert,
    servingKey: serving.key,
    serviceAccountKey: await key(dir, "service-account"),
    serviceAccountPub: join(dir, "service-account.pub"),
    clients: {},
  };
  await openssl(["ec", "-in", "service-account.key", "-pubout", "-out", "service-account.pub"], dir);
  for (const c of clients) result.clients[c.name] = await issueClientCert(dir, c);
  return result;
}

/** A client certificate signed by the CA in `dir` (made by makePki), e.g. a lab node's identity. */
export function issueClientCert(dir: string, c: ClientIdentity): Promise<{ cert: string; key: string }> {
  const subject = `/CN=${c.user}` + c.groups.map((g) => `/O=${g}`).join("");
  return signed(
    dir,
    c.name,
    subject,
    "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n",
  );
}
