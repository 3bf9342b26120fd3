// An IpvsEngine over simulated tools, for property tests: IPVS as ipvsSimulator.ts models it (with
// the kernel's server order, shown as /proc/net/ip_vs shows it) and the engine's nft table as the
// set of services it masquerades, and the source-range firewall as its state (SimulatedFirewall). The
// QEMU guest tests run the same engine against the real tools.
import { SimulatedFirewall } from "../../firewall/testing/simulatedFirewall.ts";
import { parseServiceKey } from "../../model.ts";
import { IpvsEngine, type IpvsScript } from "../ipvsEngine.ts";
import { formatSave } from "../ipvsadmSave.ts";
import { SNAT_CHAINS, SNAT_SET_TYPE, SNAT_TABLE } from "../ipvsSnat.ts";
import type { IpvsService } from "../ipvsState.ts";
import { simulateKernel } from "./ipvsSimulator.ts";

export class SimulatedIpvsEngine extends IpvsEngine {
  /** IPVS's services, servers in kernel list order. */
  kernel: IpvsService[] = [];
  /** Lines `-Sn` prints beside the services (what the engine never makes). */
  foreign = "";
  /** The masqueraded service keys; "broken": a table not as written; undefined: no table. */
  table: Set<string> | "broken" | undefined;
  readonly writes: IpvsScript[] = [];

  constructor() {
    super([], new SimulatedFirewall());
  }

  protected override read() {
    return Promise.resolve(
      this.readText(formatSave(this.kernel) + this.foreign, procText(this.kernel), this.tableJson()),
    );
  }

  protected override write(script: IpvsScript): Promise<void> {
    this.writes.push(script);
    if (script.tool === "nft") {
      // The engine always writes the table whole: its elements are all of it.
      const elements = /add element \S+ \S+ snat_services \{ (.*) \}/.exec(script.text)?.[1];
      this.table = new Set(
        (elements?.split(", ") ?? []).map((e) => {
          const [vip, protocol, port] = e.split(" . ");
          return `${protocol}:${vip}:${port}`;
        }),
      );
      return Promise.resolve();
    }
    const lines = script.text.split("\n").filter((l) => l !== "");
    const cleared = lines[0] === "-C";
    if (cleared) this.foreign = "";
    this.kernel = simulateKernel(cleared ? [] : this.kernel, cleared ? lines.slice(1) : lines);
    return Promise.resolve();
  }

  private tableJson(): string | undefined {
    if (this.table === undefined) return undefined;
    const chains = this.table === "broken" ? SNAT_CHAINS.slice(1) : SNAT_CHAINS;
    const elem = [...(this.table === "broken" ? [] : this.table)].map((k) => {
      const { protocol, vip, port } = parseServiceKey(k);
      return { concat: [vip, protocol === "tcp" ? 6 : 17, port] };
    });
    return JSON.stringify({
      nftables: [
        { table: { family: "ip", name: SNAT_TABLE } },
        {
          set: {
            family: "ip",
            name: "snat_services",
            table: SNAT_TABLE,
            type: SNAT_SET_TYPE,
            ...(elem.length && { elem }),
          },
        },
        ...chains.map((c) => ({
          chain: { name: c.name, type: c.type, hook: c.hook, prio: c.prio, policy: "accept" },
        })),
        ...chains.map((c) => ({ rule: { chain: c.name, expr: c.expr } })),
      ],
    });
  }
}

/** /proc/net/ip_vs for `kernel`: hex addresses, servers in list order. */
export function procText(kernel: IpvsService[]): string {
  const hex = (ip: string, port: number) =>
    `${ip
      .split(".")
      .map((o) => Number(o).toString(16).padStart(2, "0").toUpperCase())
      .join("")}:${port.toString(16).padStart(4, "0").toUpperCase()}`;
  return [
    "IP Virtual Server version 1.2.1 (size=4096)",
    "Prot LocalAddress:Port Scheduler Flags",
    "  -> RemoteAddress:Port Forward Weight ActiveConn InActConn",
    ...kernel.flatMap((s) => [
      `${s.protocol.toUpperCase()}  ${hex(s.vip, s.port)} ${s.scheduler}`,
      ...s.servers.map((r) => `  -> ${hex(r.ip, r.port)}      Masq    ${r.weight}      0          0`),
    ]),
    "",
  ].join("\n");
}
