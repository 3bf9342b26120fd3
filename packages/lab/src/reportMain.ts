// `npm run lab`'s report: reads the lab stack's outputs (`pulumi stack output --json`) on stdin and
// prints the VIP, the router's ECMP route to it and the spread of 100 requests from the client.
import { readFileSync } from "node:fs";
import { curlSpread, formatSpread, routerRouteText } from "./labReport.ts";
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
async function main(plan: LabPlan, vip: string): Promise<void> {
  console.log(`VIP of the demo web service: ${vip} (port 80)`);
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
