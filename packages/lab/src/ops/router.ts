// The site's upstream router: FRR (zebra, bfdd, bgpd) in the router's namespace, configured with
// the union of the `routerConfig` snippets of every platform behind it (PortableCluster renders
// each for users' routers), pasted side by side as a network team would. A platform joining,
// changing or leaving reloads the difference alone (frr-reload.py), so the other platforms'
// sessions and routes stay up; the first starts the daemons and the last stops them.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LabPlan } from "../labPlan.ts";
import { FrrRouter } from "../netns/frrRouter.ts";
import { NetnsError, stopRecorded, type ProcessRecord } from "../netns/netnsLab.ts";
import { runs } from "../processes.ts";
import { labNamespace } from "./fabric.ts";
import { siteDir, withSiteLock } from "./site.ts";

export interface RouterSpec {
  plan: LabPlan;
  /** frr.conf text (a secret when it holds the BGP password). */
  config: string;
  /** The network's instance: the router serves its bridge. */
  network: string;
}

/** This platform's snippet, as the router holds it. */
export interface RouterState {
  snippet: string;
}

/** The daemons of the site's router, recorded in the site's folder. */
interface Daemons {
  dir: string;
  daemons: ProcessRecord[];
}

const routerDir = (plan: LabPlan) => join(siteDir(plan), "router");
const snippetsDir = (plan: LabPlan) => join(routerDir(plan), "platforms");
const snippetFile = (plan: LabPlan) => join(snippetsDir(plan), `${plan.name}.conf`);
const daemonsFile = (plan: LabPlan) => join(routerDir(plan), "daemons.json");
/** FRR's own folder: one its `frr` user can reach (the site's folder is under root's home). */
const frrDir = (plan: LabPlan) => join(tmpdir(), `plb-frr-${plan.site}`);

function readDaemons(plan: LabPlan): Daemons | undefined {
  try {
    return JSON.parse(readFileSync(daemonsFile(plan), "utf8")) as Daemons;
  } catch {
    return undefined;
  }
}

/** Stops FRR's daemons, the last started first. */
async function stopDaemons(daemons: ProcessRecord[] = []): Promise<void> {
  for (const d of [...daemons].reverse()) await stopRecorded(d, 5_000);
}

const running = (d: Daemons | undefined): boolean =>
  d !== undefined && d.daemons.every((p) => runs(p.pid, p.marker));

/** Every platform's snippet, in the order of their names: the router's whole configuration. */
export function unionConfig(snippets: { platform: string; config: string }[]): string {
  const asns = new Map(snippets.map((s) => [s.platform, /^router bgp (\d+)$/m.exec(s.config)?.[1]]));
  const distinct = [...new Set(asns.values())];
  if (distinct.length > 1)
    throw new NetnsError(
      `loadBalancer.bgp.asn: the platforms behind one lab router must share its AS (got ${[...asns].map(([p, a]) => `${p}: ${a}`).join(", ")}); give them the same asn`,
    );
  return [...snippets]
    .sort((a, b) => a.platform.localeCompare(b.platform))
    .map((s) => `! ---- platform ${s.platform}\n${s.config}`)
    .join("\n");
}

function snippets(plan: LabPlan): { platform: string; config: string }[] {
  const dir = snippetsDir(plan);
  return (existsSync(dir) ? readdirSync(dir) : [])
    .filter((f) => f.endsWith(".conf"))
    .map((f) => ({ platform: f.slice(0, -".conf".length), config: readFileSync(join(dir, f), "utf8") }));
}

/** Starts the router with `config`, or brings the running one to it; call holding the site's lock. */
async function configure(plan: LabPlan, config: string | undefined): Promise<void> {
  const recorded = readDaemons(plan);
  if (config === undefined) {
    await stopDaemons(recorded?.daemons);
    rmSync(frrDir(plan), { recursive: true, force: true });
    rmSync(daemonsFile(plan), { force: true });
    return;
  }
  if (recorded && running(recorded)) {
    const file = join(recorded.dir, "frr.conf");
    writeFileSync(file, config, { mode: 0o600 });
    await FrrRouter.reload(labNamespace(plan, plan.router.netns), recorded.dir, file);
    return;
  }
  // Dead (a crash, a reboot) or never started: whatever is left is stopped, then all afresh.
  await stopDaemons(recorded?.daemons);
  const daemons: ProcessRecord[] = [];
  try {
    const router = await FrrRouter.start(
      labNamespace(plan, plan.router.netns, daemons),
      config,
      frrDir(plan),
    );
    writeFileSync(daemonsFile(plan), JSON.stringify({ dir: router.dir, daemons } satisfies Daemons, null, 2));
  } catch (err) {
    await stopDaemons(daemons);
    throw err;
  }
}

async function apply({ plan, config }: RouterSpec): Promise<RouterState> {
  return withSiteLock(plan, async () => {
    mkdirSync(snippetsDir(plan), { recursive: true });
    const snippet = snippetFile(plan);
    const before = existsSync(snippet) ? readFileSync(snippet, "utf8") : undefined;
    writeFileSync(snippet, config, { mode: 0o600 });
    try {
      await configure(plan, unionConfig(snippets(plan)));
    } catch (err) {
      // The router keeps what it had; so does the record of it.
      if (before === undefined) rmSync(snippet, { force: true });
      else writeFileSync(snippet, before, { mode: 0o600 });
      throw err;
    }
    return { snippet };
  });
}

export const create = apply;

export function healthy({ plan, config }: RouterSpec, state: RouterState): boolean {
  return (
    state.snippet !== undefined &&
    existsSync(state.snippet) &&
    readFileSync(state.snippet, "utf8") === config &&
    running(readDaemons(plan))
  );
}

/** A changed snippet or a dead router: both are brought in place, the other platforms' sessions kept. */
export function updatable(): boolean {
  return true;
}

/** A router recorded before routers were the site's: its own daemons. */
type LegacyState = Partial<RouterState> & { daemons?: ProcessRecord[]; dir?: string };

async function stopLegacy(state: LegacyState | undefined): Promise<void> {
  await stopDaemons(state?.daemons);
  if (state?.dir) rmSync(state.dir, { recursive: true, force: true });
}

export async function update(_olds: RouterSpec, spec: RouterSpec, state: LegacyState): Promise<RouterState> {
  await stopLegacy(state);
  return apply(spec);
}

export async function remove({ plan }: RouterSpec, state: LegacyState | undefined): Promise<void> {
  await stopLegacy(state);
  await withSiteLock(plan, async () => {
    rmSync(snippetFile(plan), { force: true });
    const rest = snippets(plan);
    await configure(plan, rest.length ? unionConfig(rest) : undefined);
  });
}
