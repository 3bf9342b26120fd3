// The plugin's entry point (package.json "main"): serves the components below to Pulumi programs
// in any language, under the package name `portable-lb`. Pulumi reads the schema from these
// TypeScript sources (tsconfig.json beside src/) at run time, so the package ships them with dist/.
import { dirname } from "node:path";
import { componentProviderHost } from "@pulumi/pulumi/provider/experimental/index.js";
import { LoadBalancerService } from "./loadBalancerService.ts";

export { ExternalTrafficPolicy, HandoverRelay, LoadBalancerService } from "./loadBalancerService.ts";
export type { Handover, LoadBalancerServiceArgs, ServicePort, VipPool } from "./loadBalancerService.ts";

componentProviderHost({
  name: "portable-lb",
  components: [LoadBalancerService],
  // The package's folder (src/ or dist/ is this file's), where Pulumi finds package.json and tsconfig.json.
  dirname: dirname(__dirname),
}).catch((err: unknown) => {
  console.error(`portable-lb plugin: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
