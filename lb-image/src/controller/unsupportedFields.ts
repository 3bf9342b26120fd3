// Fields of a LoadBalancer Service that users rely on and this version does not honour yet (the
// ones it honours where the data plane can, sessionAffinity and externalTrafficPolicy, are judged
// per port in desiredState.ts): each is refused out loud, a Warning on the Service naming the field, what the LB pods do instead and what
// to do, never accepted and then silently ignored. (A pure function of our Services.)
import type { V1Service } from "@kubernetes/client-node";
import { refOf, type SkippedItem } from "./desiredState.ts";

interface Field {
  reason: string;
  /** The message when `svc` sets the field to what is not honoured; undefined when it does not. */
  check: (svc: V1Service) => string | undefined;
}

const FIELDS: Field[] = [
  {
    reason: "IPv6Unsupported",
    check: (svc) =>
      (svc.spec?.ipFamilies ?? []).includes("IPv6") || svc.spec?.ipFamilyPolicy === "RequireDualStack"
        ? `portable-lb serves IPv4 only (spec.ipFamilies ${JSON.stringify(svc.spec?.ipFamilies ?? [])}, ipFamilyPolicy ${svc.spec?.ipFamilyPolicy ?? "SingleStack"}): the Service gets an IPv4 VIP at most, and no IPv6 client reaches it. Use ipFamilies [IPv4] to silence this Warning`
        : undefined,
  },
];

/** A Warning per Service and field this version does not honour. */
export function unsupportedFields(services: readonly V1Service[]): SkippedItem[] {
  return services.flatMap((svc) =>
    FIELDS.flatMap(({ reason, check }) => {
      const message = check(svc);
      return message === undefined ? [] : [{ ...refOf(svc), kind: "Service" as const, reason, message }];
    }),
  );
}
