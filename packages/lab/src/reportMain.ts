// `npm run lab`'s report: reads the lab stack's outputs (`pulumi stack output --json`) on stdin and
// prints the VIP, the router's ECMP route to it and the spread of 100 requests from the client.
import { readFileSync } from "node:fs";
import { curlSpread, formatSpread, routerNextHops, routerRouteText } from "./labReport.ts";
import { waitUntil } from "./processes.ts";
import type { LabPlan } from "./labPlan.ts";

const outputs = JSON.parse(readFileSync(0, "utf8")) as {
  labPlan?: LabPlan;
  demoVip?: string;
  kubeconfig?: string;
};
const plan = outputs.labPlan;
const vip = outputs.demoVip;
if (!plan || !vip) {
  console.error(
    "lab report: the stack has no labPlan or demoVip output; is this the lab stack, with demoApp set?",
  );
  process.exit(2);
}
/**
 * Waits (bounded) until the router has a route to the VIP that held still for a few seconds: right
 * after a piece was recreated, the LB speakers are still (re)joining, and a report taken then shows
 * an empty route and failed requests.
 */
async function settledRoute(plan: LabPlan, vip: string): Promise<boolean> {
  let last = "";
  let since = Date.now();
  return waitUntil(
    async () => {
      const hops = JSON.stringify((await routerNextHops(plan, vip)).map((h) => h.gateway));
      if (hops !== last) [last, since] = [hops, Date.now()];
      return hops !== "[]" && Date.now() - since >= ROUTE_STILL_MS;
    },
    ROUTE_WAIT_MS,
    500,
  );
}
const ROUTE_STILL_MS = 3_000;
const ROUTE_WAIT_MS = 120_000;

async function main(plan: LabPlan, vip: string): Promise<void> {
  console.log(`VIP of the demo web service: ${vip} (port 80)`);
  if (!(await settledRoute(plan, vip)))
    console.log(
      `(the router's route did not settle within ${ROUTE_WAIT_MS / 1000} s: the LB pods are not all up)`,
    );
  console.log(`kubectl: KUBECONFIG=${outputs.kubeconfig} kubectl get nodes,pods -A -o wide`);
  console.log(
    `\nthe upstream router's route to it (ip netns exec ${plan.router.netns} ip route show ${vip}):`,
  );
  console.log((await routerRouteText(plan, vip)).trimEnd());
  console.log(`\n100 requests from the client (ip netns exec ${plan.client.netns} curl http://${vip}/):`);
  console.log(formatSpread(await curlSpread(plan, vip, 100)));
}

main(plan, vip).catch((err: unknown) => {
  console.error(`lab report: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
