// A real DNS server for the migration tests: BIND's named (Debian's package, unpacked by the
// bootstrap, never installed as a service) in the lab client's namespace, authoritative for one zone
// that takes RFC 2136 updates signed with a TSIG key. The client resolves through it at its own
// address; this machine reaches it for updates at 127.0.0.1:<port> over TCP, through a socket
// forwarder pair (the lab's forwarder.ts in the namespace, a TcpProxy here), so every listener stays
// inside the namespace or on loopback.
import { randomBytes } from "node:crypto";
import { chownSync, existsSync, globSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { labNamespace, waitUntil, type LabPlan, type LabProcess } from "@portable-lb/lab";
import { repoRoot } from "../repoRoot.ts";
import { TcpProxy } from "../tcpProxy.ts";

const NOBODY = 65534;

/** The named the bootstrap unpacked (scripts/bootstrap/named.sh). */
function namedBinary(): string {
  const cache = process.env.PORTABLE_LB_CACHE ?? join(process.env.HOME ?? "/root", ".cache/portable-lb");
  const found = globSync(join(cache, "tools", "bind9-*", "bin", "named")).sort();
  if (!found.length)
    throw new Error(`dns server: no named under ${cache}/tools; run the bootstrap (npm run bootstrap)`);
  return found.at(-1)!;
}

export class DnsServer {
  /** Where the lab's client resolves (port 53 of its own address). */
  readonly address: string;
  /** Where this machine sends updates and queries (TCP). */
  readonly local: { host: string; port: number };
  readonly keyFile: string;
  readonly zone: string;
  readonly #dir: string;
  readonly #named: LabProcess;
  readonly #inside: LabProcess;
  readonly #proxy: TcpProxy;

  private constructor(o: {
    address: string;
    port: number;
    zone: string;
    dir: string;
    named: LabProcess;
    inside: LabProcess;
    proxy: TcpProxy;
  }) {
    this.address = o.address;
    this.local = { host: "127.0.0.1", port: o.port };
    this.zone = o.zone;
    this.keyFile = join(o.dir, "update.key");
    this.#dir = o.dir;
    this.#named = o.named;
    this.#inside = o.inside;
    this.#proxy = o.proxy;
  }

  /** Starts named for `zone` (e.g. "shop.test.") in the client namespace of `plan`'s site. */
  static async start(plan: LabPlan, zone: string): Promise<DnsServer> {
    const dir = mkdtempSync(join(tmpdir(), "plb-dns-"));
    const client = labNamespace(plan, plan.client.netns);
    const address = plan.client.ip;
    const secret = randomBytes(32).toString("base64");
    writeFileSync(
      join(dir, "update.key"),
      `key "migrate" {\n\talgorithm hmac-sha256;\n\tsecret "${secret}";\n};\n`,
      { mode: 0o600 },
    );
    writeFileSync(
      join(dir, "db.zone"),
      [
        `$TTL 60`,
        `@ IN SOA ns.${zone} hostmaster.${zone} 1 60 60 600 5`,
        `@ IN NS ns.${zone}`,
        `ns IN A ${address}`,
        "",
      ].join("\n"),
    );
    writeFileSync(
      join(dir, "named.conf"),
      [
        `include "${dir}/update.key";`,
        `options {`,
        `  directory "${dir}";`,
        `  pid-file "${dir}/named.pid";`,
        `  listen-on port 53 { ${address}; };`,
        `  listen-on-v6 { none; };`,
        // Only its own zone: a resolver for anything else would send queries out of the lab.
        `  recursion no;`,
        `  dnssec-validation no;`,
        `};`,
        `zone "${zone}" { type primary; file "${dir}/db.zone"; allow-update { key "migrate"; }; };`,
        "",
      ].join("\n"),
    );
    // named drops to nobody after binding port 53 and writes the zone's journal into the folder.
    chownSync(dir, NOBODY, NOBODY);
    for (const f of ["db.zone", "named.conf", "update.key"]) chownSync(join(dir, f), NOBODY, NOBODY);
    const proxies: { named?: LabProcess; inside?: LabProcess; proxy?: TcpProxy } = {};
    try {
      const conf = join(dir, "named.conf");
      proxies.named = await client.spawn(`named-${zone}`, namedBinary(), ["-g", "-u", "nobody", "-c", conf], {
        marker: conf,
        waitForPort: 53,
      });
      const socket = join(dir, "dns.sock");
      const script = join(repoRoot(), "packages/lab/src/forwarder.ts");
      proxies.inside = await client.spawn(
        `dns-forwarder-${zone}`,
        process.execPath,
        [
          "--disable-warning=MODULE_TYPELESS_PACKAGE_JSON",
          script,
          "--listen",
          `unix:${socket}`,
          "--connect",
          `tcp:${address}:53`,
        ],
        { marker: `${script} --listen unix:${socket}` },
      );
      if (!(await waitUntil(() => existsSync(socket), 10_000, 100)))
        throw new Error(
          `dns server: its forwarder did not listen on ${socket}; see ${proxies.inside.logFile}`,
        );
      proxies.proxy = new TcpProxy({ path: socket });
      const port = await proxies.proxy.up();
      return new DnsServer({
        address,
        port,
        zone,
        dir,
        named: proxies.named,
        inside: proxies.inside,
        proxy: proxies.proxy,
      });
    } catch (err) {
      await proxies.proxy?.cut();
      await proxies.inside?.stop();
      await proxies.named?.stop();
      rmSync(dir, { recursive: true, force: true });
      throw err;
    }
  }

  async stop(): Promise<void> {
    await this.#proxy.cut();
    await this.#inside.stop();
    await this.#named.stop();
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
