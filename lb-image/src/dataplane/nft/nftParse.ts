// Reads the engine's table back from `nft -a -n -s list table ip portable_lb`, and the per-service
// connection counters from `nft -n list map ip portable_lb services`, line by line as nft prints
// them. Text, not `nft -j`: at 10,000 services the table holds 2.5 M lookup slots, which as one JSON
// document is a ~150 MB string and ~1 GB of parsed objects in the controller; fed line by line, the
// parser holds one service's line at a time and shares one string per backend across its slots.
//
// Strict: it recognises exactly the table the engine makes (the two dispatch maps, the two flow
// tables, the base chains with their hook, priority, policy and rules, and svc_ chains with one rule
// each) and reports anything else as drift, never by throwing: a table it cannot make sense of is
// replaced. The flow tables' elements (flows the data plane remembers, not state we apply) are skipped.
import { driftOf, type Drift } from "../drift.ts";
import { serviceKey, type Forwarding, type VipCounter } from "../model.ts";
import {
  BASE_CHAINS,
  FLOW_HASH_SEED,
  FLOW_MAP_LISTED,
  SERVICES_MAP_LISTED,
  baseChainListed,
  RELAY_RULE_LISTED_HEAD,
  RELAY_RULE_LISTED_TAIL,
  dsrRuleListedHead,
  dsrRuleListedTail,
  snatRuleListedHead,
  type BaseChain,
} from "./nftRuleset.ts";
import { NFT_TABLE, lookupTable, objectId, sortNft, type NftService } from "./nftState.ts";

export interface DispatchEntry {
  service: Pick<NftService, "protocol" | "vip" | "port" | "forwarding">;
  chain: string;
  connections: number;
}

/** What a full read found: the services as they stand, drift, and the handles of our rules. */
export interface NftRead {
  services: NftService[];
  drift: Drift[];
  /** Chain name → the handles of its rules of ours (with `-a`), for the cheap check. */
  ruleHandles: Map<string, number[]>;
}

// `-n` prints protocols as numbers; names are accepted too.
const PROTOCOLS: Record<string, "tcp" | "udp"> = { "6": "tcp", "17": "udp", tcp: "tcp", udp: "udp" };
// One dispatch-map element: `10.0.0.1 . 6 . 80 [counter [packets P bytes B]] : goto svc_…`.
const ELEMENT =
  /^(\d{1,3}(?:\.\d{1,3}){3}) \. (\w+) \. (\d+)(?: counter(?: packets (\d+) bytes \d+)?)? : goto (\S+)$/;
// One lookup-table slot of a service rule: `7 : 10.244.1.5 . 8080` (snat), `7 : 0x0af40105` (dsr).
const SLOT: Record<Forwarding, RegExp> = {
  snat: /^(\d+) : (\d{1,3}(?:\.\d{1,3}){3} \. \d+)$/,
  dsr: /^(\d+) : (0x[0-9a-f]{8})$/,
};
/** The maps of the table: the two dispatch maps and the two flow tables, with their declarations. */
const MAPS: Record<string, { listed: readonly string[]; forwarding?: Forwarding }> = {
  services: { listed: SERVICES_MAP_LISTED, forwarding: "snat" },
  dsr_services: { listed: SERVICES_MAP_LISTED, forwarding: "dsr" },
  flows_tcp: { listed: FLOW_MAP_LISTED },
  flows_udp: { listed: FLOW_MAP_LISTED },
};
// An object's first line inside the table: `chain svc_tcp_0a000001_80 { # handle 8`.
const OBJECT = /^(.+) (\S+) \{(?: # handle \d+)?$/;
const HANDLE = / # handle (\d+)$/;
const TABLE_LINE = new RegExp(`^table ip ${NFT_TABLE} \\{(?: # handle \\d+)?$`);

type Section =
  | { kind: "outside" }
  | { kind: "table" }
  | { kind: "map"; name: string; lines: number }
  | { kind: "elements"; map: string }
  | { kind: "base"; chain: BaseChain; header: boolean; rules: number }
  | { kind: "service"; chain: string; rules: ({ handle: number } & ServiceRule)[] }
  | { kind: "skip" }
  | { kind: "done" };

/** One rule of a service chain as read: its slots' labels (or why it is not ours), and its kind. */
interface ServiceRule {
  labels: string[] | string;
  forwarding: Forwarding | undefined;
  /** A handover's relay rule (it comes before the service's own). */
  relay?: true;
  affinity?: "clientIP";
}

/** A service chain as read. */
interface ServiceChain {
  labels: string[] | string;
  handles: number[];
  forwarding: Forwarding | undefined;
  relay?: string[];
  affinity?: "clientIP";
}

/** Feeds on nft's text output one line at a time (no line breaks inside a line). */
export class NftTableParser {
  readonly #entries: DispatchEntry[] = [];
  readonly #chains = new Map<string, ServiceChain>();
  readonly #baseSeen = new Set<string>();
  readonly #drift: Drift[] = [];
  /** One string per backend for all its slots in all services. */
  readonly #labels = new Map<string, string>();
  #section: Section = { kind: "outside" };
  readonly #mapsSeen = new Set<string>();
  readonly ruleHandles = new Map<string, number[]>();

  line(text: string): void {
    const line = text.trim();
    const s = this.#section;
    if (s.kind === "elements") return this.#elements(s.map, line);
    if (line === "" || s.kind === "done") {
      if (line !== "") this.#drift.push(driftOf("unparseable", `nft: text after the table: ${line}`));
      return;
    }
    switch (s.kind) {
      case "outside":
        if (TABLE_LINE.test(line)) this.#section = { kind: "table" };
        else this.#drift.push(driftOf("unparseable", `nft: expected table ip ${NFT_TABLE}, got: ${line}`));
        return;
      case "table":
        return this.#object(line);
      case "skip":
        if (line === "}") this.#section = { kind: "table" };
        return;
      case "map":
        return this.#mapLine(s, line);
      case "base":
        return this.#baseLine(s, line);
      case "service":
        return this.#serviceLine(s, line);
    }
  }

  /** The services in the table as they stand, what differs from the engine's layout, and the rule handles. */
  result(): NftRead {
    const drift = [...this.#drift];
    if (this.#section.kind !== "done") drift.push(driftOf("unparseable", "nft: the listing ended early"));
    for (const name of Object.keys(MAPS))
      if (!this.#mapsSeen.has(name)) drift.push(driftOf("base", `nft: the ${name} map is missing`));
    for (const c of BASE_CHAINS)
      if (!this.#baseSeen.has(c.name)) drift.push(driftOf("base", `nft: base chain ${c.name} is missing`));
    const services: NftService[] = [];
    const referenced = new Set<string>();
    for (const { service, chain } of this.#entries) {
      const expected = `svc_${objectId(service)}`;
      const found = this.#chains.get(chain);
      referenced.add(chain);
      if (chain !== expected || !found) {
        drift.push(
          driftOf(
            "foreign",
            `nft: services element ${JSON.stringify(service)} goes to ${chain}, not ${expected}`,
          ),
        );
        continue;
      }
      // A dropping chain (no backend) reads the same under either map.
      const broken =
        typeof found.labels === "string"
          ? found.labels
          : found.forwarding !== undefined && found.forwarding !== service.forwarding
            ? `forwards by ${found.forwarding} but is in the ${service.forwarding} dispatch map`
            : undefined;
      if (broken !== undefined) {
        drift.push(driftOf("service", `nft: chain ${chain} ${broken}`, serviceKey(service)));
        services.push({ ...service, backends: [], slots: new Uint16Array(), broken });
      } else {
        services.push({
          ...service,
          ...lookupTable(found.labels),
          ...(found.relay && { relay: found.relay }),
          ...(found.affinity && { affinity: found.affinity }),
        });
        this.ruleHandles.set(chain, found.handles);
      }
    }
    for (const chain of this.#chains.keys())
      if (!referenced.has(chain))
        drift.push(driftOf("foreign", `nft: chain ${chain} has no services element`));
    return { services: sortNft(services), drift, ruleHandles: this.ruleHandles };
  }

  /**
   * The dispatch map elements and what the listing so far showed wrong (a listing of one dispatch
   * map; nft fails on a missing one).
   */
  dispatch(): { entries: DispatchEntry[]; drift: Drift[] } {
    return { entries: this.#entries, drift: [...this.#drift] };
  }

  counters(): VipCounter[] {
    return this.#entries.map(({ service: { vip, port, protocol }, connections }) => ({
      vip,
      port,
      protocol,
      connections,
    }));
  }

  #object(line: string): void {
    if (line === "}") {
      this.#section = { kind: "done" };
      return;
    }
    const m = OBJECT.exec(line);
    const [what, name] = m ? [m[1]!, m[2]!] : ["", ""];
    const base = BASE_CHAINS.find((c) => c.name === name);
    if (what === "map" && MAPS[name] && !this.#mapsSeen.has(name)) {
      this.#mapsSeen.add(name);
      this.#section = { kind: "map", name, lines: 0 };
    } else if (what === "chain" && base && !this.#baseSeen.has(name)) {
      this.#baseSeen.add(name);
      this.#section = { kind: "base", chain: base, header: false, rules: 0 };
    } else if (what === "chain" && name.startsWith("svc_") && !this.#chains.has(name)) {
      this.#section = { kind: "service", chain: name, rules: [] };
    } else {
      this.#drift.push(
        driftOf(m ? "foreign" : "unparseable", `nft: ${m ? "foreign object" : "unexpected line"}: ${line}`),
      );
      this.#section = { kind: "skip" };
    }
  }

  #mapLine(s: Extract<Section, { kind: "map" }>, line: string): void {
    const { listed } = MAPS[s.name]!;
    if (line === "}") {
      if (s.lines >= 0 && s.lines !== listed.length)
        this.#drift.push(driftOf("base", `nft: the ${s.name} map's declaration changed`));
      this.#section = { kind: "table" };
    } else if (line.startsWith("elements = {")) {
      this.#section = { kind: "elements", map: s.name };
      this.#elements(s.name, line.slice("elements = {".length).trim());
    } else if (line === listed[s.lines]) {
      s.lines++;
    } else if (s.lines >= 0) {
      this.#drift.push(driftOf("base", `nft: the ${s.name} map has "${line}"`));
      s.lines = -1; // reported once
    }
  }

  #baseLine(s: Extract<Section, { kind: "base" }>, line: string): void {
    const { chain } = s;
    if (line === "}") {
      if (!s.header) this.#drift.push(driftOf("base", `nft: base chain ${chain.name} lost its hook`));
      if (s.rules !== chain.rules.length)
        this.#drift.push(
          driftOf(
            "base",
            `nft: base chain ${chain.name} holds ${s.rules} of its ${chain.rules.length} rules`,
          ),
        );
      this.#section = { kind: "table" };
      return;
    }
    if (!s.header && line.startsWith("type ")) {
      s.header = true;
      if (line !== baseChainListed(chain))
        this.#drift.push(driftOf("base", `nft: base chain ${chain.name} changed: ${line}`));
      return;
    }
    const { rule, handle } = splitHandle(line);
    // In order: a rule out of place changes what the chain does.
    if (rule === chain.rules[s.rules]?.listed) {
      s.rules++;
      if (handle !== undefined)
        this.ruleHandles.set(chain.name, [...(this.ruleHandles.get(chain.name) ?? []), handle]);
    } else this.#drift.push(driftOf("foreign", `nft: foreign rule in ${chain.name}: ${rule}`));
  }

  #serviceLine(s: Extract<Section, { kind: "service" }>, line: string): void {
    if (line !== "}") {
      const { rule, handle } = splitHandle(line);
      s.rules.push({ handle: handle ?? 0, ...this.#rule(s.chain, rule) });
      return;
    }
    this.#chains.set(s.chain, serviceChain(s.rules));
    this.#section = { kind: "table" };
  }

  /** Part of `elements = { a, b,\n c }`: entries separated by ", ", the last closing with " }". */
  #elements(map: string, text: string): void {
    const last = text.endsWith("}");
    const { listed, forwarding } = MAPS[map]!;
    if (last) this.#section = { kind: "map", name: map, lines: listed.length };
    if (!forwarding) return; // a flow table's remembered flows
    for (const part of (last ? text.slice(0, -1) : text).split(",")) {
      const element = part.trim();
      if (element === "") continue;
      const m = ELEMENT.exec(element);
      const protocol = m ? PROTOCOLS[m[2]!] : undefined;
      if (!m || !protocol) {
        this.#drift.push(driftOf("foreign", `nft: foreign ${map} element "${element}"`));
        continue;
      }
      this.#entries.push({
        service: { vip: m[1]!, protocol, port: Number(m[3]), forwarding },
        chain: m[5]!,
        connections: Number(m[4] ?? 0),
      });
    }
  }

  /**
   * A service chain's one rule, as the backend label of each slot: `drop` (no backend, either
   * forwarding), a dnat through `map { 0 : ip . port, … }` (snat), or a mark through
   * `map { 0 : 0x0af40105, … }` with the flow-table update (dsr); a string says why it is not ours.
   */
  #rule(chain: string, line: string): ServiceRule {
    if (line === "drop") return { labels: [], forwarding: undefined };
    const protocol = chain.split("_")[1] === "udp" ? "udp" : "tcp";
    const relay = protocol === "tcp" && line.startsWith(RELAY_RULE_LISTED_HEAD);
    // The service's own rule, hashed on the client's address and port or, with affinity, on the
    // address alone.
    const shape = (["clientIP", undefined] as const)
      .flatMap((affinity) => [
        {
          affinity,
          forwarding: "snat" as const,
          head: snatRuleListedHead({ protocol, affinity }),
          tail: " }",
        },
        {
          affinity,
          forwarding: "dsr" as const,
          head: dsrRuleListedHead({ protocol, affinity }),
          tail: dsrRuleListedTail(protocol),
        },
      ])
      .find((r) => line.startsWith(r.head));
    const affinity = relay ? undefined : shape?.affinity;
    const [forwarding, head, tail] = relay
      ? (["dsr", RELAY_RULE_LISTED_HEAD, RELAY_RULE_LISTED_TAIL] as const)
      : shape
        ? ([shape.forwarding, shape.head, shape.tail] as const)
        : (["dsr", dsrRuleListedHead({ protocol }), dsrRuleListedTail(protocol)] as const);
    const mod = /^(\d+) seed (\S+) map \{ /.exec(line.slice(head.length));
    if (!line.startsWith(head) || !mod || mod[2] !== FLOW_HASH_SEED || !line.endsWith(tail))
      return { labels: `does not hold a portable-lb backend map: ${line}`, forwarding };
    const slots: string[] = [];
    let count = 0;
    for (const part of line.slice(head.length + mod[0].length, -tail.length).split(", ")) {
      const m = SLOT[forwarding].exec(part);
      if (!m) return { labels: `has an unexpected slot "${part}"`, forwarding };
      const label = m[2]!;
      let shared = this.#labels.get(label);
      if (shared === undefined) this.#labels.set(label, (shared = label));
      slots[Number(m[1])] = shared;
      count++;
    }
    if (count !== slots.length || count !== Number(mod[1]))
      return { labels: "has a lookup table with gaps", forwarding };
    return { labels: slots, forwarding, ...(relay && { relay }), ...(affinity && { affinity }) };
  }
}

/**
 * A service chain from its rules: the service's own rule, after a handover's relay rule where
 * there is one (relay slots are one per LB node: slot i is node i); anything else is not ours.
 */
function serviceChain(rules: ({ handle: number } & ServiceRule)[]): ServiceChain {
  const handles = rules.map((r) => r.handle);
  const [first, second] = rules;
  const why = (labels: string): ServiceChain => ({ labels, handles, forwarding: first?.forwarding });
  if (!first) return why("holds no rule");
  if (rules.length > 2 || (rules.length === 2 && !first.relay)) return why(`holds ${rules.length} rules`);
  if (!second)
    return first.relay
      ? why("holds a handover relay but no rule of its own")
      : {
          labels: first.labels,
          handles,
          forwarding: first.forwarding,
          ...(first.affinity && { affinity: first.affinity }),
        };
  if (typeof first.labels === "string") return why(`has a handover relay that ${first.labels}`);
  if (second.relay) return why("holds two handover relays");
  // A relay's slot i goes to LB node i, each once (toNft's rendering).
  if (new Set(first.labels).size !== first.labels.length)
    return why("has a handover relay whose LB nodes repeat");
  return {
    labels: second.labels,
    handles,
    forwarding: second.forwarding ?? "dsr",
    relay: first.labels,
    ...(second.affinity && { affinity: second.affinity }),
  };
}

function splitHandle(line: string): { rule: string; handle: number | undefined } {
  const m = HANDLE.exec(line);
  return m ? { rule: line.slice(0, m.index), handle: Number(m[1]) } : { rule: line, handle: undefined };
}

/**
 * `nft -n list chains ip`: the chains of the engine's table, each with its header line (base chains'
 * `type … hook …`) or "" (regular chains). Other tables are not ours to judge.
 */
export function parseChainList(text: string): Map<string, string> {
  const chains = new Map<string, string>();
  let inTable = false;
  let chain: string | undefined;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line.startsWith("table ")) inTable = TABLE_LINE.test(line);
    else if (!inTable) continue;
    else if (line.startsWith("chain ")) chains.set((chain = line.slice("chain ".length).split(" ")[0]!), "");
    else if (chain !== undefined && line.startsWith("type ")) chains.set(chain, line);
    else if (line === "}" && chain !== undefined) chain = undefined;
    else if (line === "}") inTable = false;
  }
  return chains;
}

/** Parses a whole listing (tests and the small map listing; the engine streams the table). */
export function parseNftText(text: string): NftTableParser {
  const parser = new NftTableParser();
  for (const line of text.split("\n")) parser.line(line);
  return parser;
}
