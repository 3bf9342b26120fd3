// The migration as a command (README.md, "Migrating an app"), run where `pulumi` runs for the app:
//   node examples/migrate/index.ts --app examples/app-stack --from onprem --to aws \
//     --to-platform organization/portable-lb/aws --way dns \
//     --dns-name www.shop.example. --dns-zone shop.example. --dns-server ns1.example:53 \
//     --dns-key /etc/portable-lb/shop.key --dns-ttl 60
//   node examples/migrate/index.ts --app examples/app-stack --from site-a --to site-b \
//     --to-platform organization/portable-lb/site-b --way bgp
// --verify-command "ssh client curl -sf {url}" checks the target's VIP from where clients are
// (default: HTTP from this machine). The backend and passphrase come from the environment, as for
// `pulumi` itself (PULUMI_BACKEND_URL, PULUMI_CONFIG_PASSPHRASE).
import { execFile } from "node:child_process";
import { promisify, parseArgs } from "node:util";
import { Rfc2136Record } from "./dnsRecord.ts";
import { migrate, type TrafficMove } from "./migration.ts";

const { values: v } = parseArgs({
  options: {
    app: { type: "string" },
    from: { type: "string" },
    to: { type: "string" },
    "to-platform": { type: "string" },
    way: { type: "string" },
    "dns-name": { type: "string" },
    "dns-zone": { type: "string" },
    "dns-server": { type: "string" },
    "dns-key": { type: "string" },
    "dns-ttl": { type: "string", default: "60" },
    "verify-command": { type: "string" },
  },
});

function required(flag: keyof typeof v): string {
  const value = v[flag];
  if (typeof value !== "string" || value === "")
    throw new Error(`--${flag} is required (see the usage at the top of index.ts)`);
  return value;
}

function way(): TrafficMove {
  const kind = required("way");
  if (kind === "bgp") return { kind };
  if (kind !== "dns")
    throw new Error(`--way: "${kind}" is not a way; use dns (a new VIP) or bgp (the same VIP)`);
  const server = /^([^:\s]+):(\d{1,5})$/.exec(required("dns-server"));
  if (!server) throw new Error(`--dns-server: "${v["dns-server"]}" is not HOST:PORT, e.g. ns1.example:53`);
  return {
    kind,
    record: new Rfc2136Record({
      name: required("dns-name"),
      zone: required("dns-zone"),
      server: { host: server[1]!, port: Number(server[2]) },
      keyFile: required("dns-key"),
      ttlSeconds: Number(v["dns-ttl"]),
    }),
  };
}

/** Five answers in a row, by the given command or by HTTP from here. */
async function verify(url: string): Promise<void> {
  for (let i = 0; i < 5; i++) {
    if (v["verify-command"]) {
      const [command, ...args] = v["verify-command"].replaceAll("{url}", url).split(/\s+/);
      await promisify(execFile)(command!, args, { timeout: 10_000 });
    } else {
      const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
      if (!res.ok) throw new Error(`verify: ${url} answered ${res.status}`);
    }
  }
}

async function main(): Promise<void> {
  const result = await migrate({
    appDir: required("app"),
    from: required("from"),
    to: required("to"),
    toPlatform: required("to-platform"),
    way: way(),
    verify,
    log: (line) => console.log(line),
  });
  console.log(JSON.stringify(result));
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? `${err.name}: ${err.message}` : err);
  process.exit(1);
});
