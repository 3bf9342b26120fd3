// The app's DNS name, moved by RFC 2136 dynamic updates: the protocol BIND, PowerDNS, Knot, Windows
// DNS and external-dns's rfc2136 provider all speak, so the migration works with whatever DNS
// server a site runs. Updates are signed with a TSIG key (read from a key file, never put on a
// command line where `ps` would show it) and sent over TCP, so one forwarded port reaches the server.
// The cloud DNS APIs (Route 53, Cloud DNS) would be other implementations of `DnsRecord`.
import { execFile } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

/** One A record set the migration points at a VIP. */
export interface DnsRecord {
  /** The fully qualified name, e.g. "www.shop.example.". */
  readonly name: string;
  /** The TTL written with the record: how long resolvers may keep the old address. */
  readonly ttlSeconds: number;
  /** Makes `ip` the name's only address. */
  point(ip: string): Promise<void>;
  /** The addresses the server answers now. */
  addresses(): Promise<string[]>;
}

export interface Rfc2136RecordOptions {
  name: string;
  ttlSeconds: number;
  /** The primary server that takes updates. */
  server: { host: string; port: number };
  /** The zone the name is in, e.g. "shop.example.". */
  zone: string;
  /** A TSIG key file as `tsig-keygen` writes it (the key `nsupdate -k` reads). */
  keyFile: string;
}

const FQDN = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)+$/;

export class Rfc2136Record implements DnsRecord {
  readonly name: string;
  readonly ttlSeconds: number;
  readonly #o: Rfc2136RecordOptions;

  constructor(o: Rfc2136RecordOptions) {
    for (const [field, value] of [
      ["name", o.name],
      ["zone", o.zone],
    ] as const)
      if (!FQDN.test(value))
        throw new Error(
          `dns.${field}: "${value}" is not a fully qualified name; end it with a dot, e.g. "www.shop.example."`,
        );
    if (!o.name.endsWith(`.${o.zone}`))
      throw new Error(`dns.name: "${o.name}" is not in zone "${o.zone}"; give a name under the zone`);
    if (!Number.isInteger(o.ttlSeconds) || o.ttlSeconds < 1 || o.ttlSeconds > 86_400)
      throw new Error(`dns.ttlSeconds: ${o.ttlSeconds} is not a whole number of seconds from 1 to 86400`);
    this.name = o.name;
    this.ttlSeconds = o.ttlSeconds;
    this.#o = o;
  }

  async point(ip: string): Promise<void> {
    const { server, zone, keyFile } = this.#o;
    // One message: the delete and the add are applied together, so no resolver sees the name empty.
    const script = [
      `server ${server.host} ${server.port}`,
      `zone ${zone}`,
      `update delete ${this.name} A`,
      `update add ${this.name} ${this.ttlSeconds} A ${ip}`,
      "send",
      "",
    ].join("\n");
    await nsupdate(["-v", "-t", "10", "-k", keyFile], script);
  }

  async addresses(): Promise<string[]> {
    const { server } = this.#o;
    const { stdout } = await run(
      "dig",
      ["+tcp", "+short", "+time=3", "+tries=2", "-p", String(server.port), `@${server.host}`, this.name, "A"],
      { timeout: 15_000 },
    );
    return stdout.split("\n").filter((l) => /^\d+\.\d+\.\d+\.\d+$/.test(l));
  }
}

function nsupdate(args: string[], script: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = execFile("nsupdate", args, { timeout: 30_000 }, (err, _stdout, stderr) =>
      err ? reject(new Error(`nsupdate failed: ${stderr.trim() || err.message}`)) : resolve(),
    );
    child.stdin?.end(script);
  });
}
