"""The app stack of ../app-stack in Python: a web Deployment behind a VIP.

It knows nothing of where it runs: everything environment specific (the cluster's kubeconfig, the
LB class, the VIP pools) comes from the platform stack's outputs, so moving to another platform is
one setting:  pulumi config set platform organization/portable-lb/aws
Settings (project `shop-py`):
  platform   (required) the platform stack, e.g. organization/portable-lb/onprem
  image      (required) the web server's image: it listens on :80 and answers with its pod's IP
  replicas   default 2
  pool       the VIP pool to allocate from; default "web"
  vip        a specific VIP instead (a migration by BGP keeps the old platform's)
  announce   false: keep serving but stop announcing the VIP (a migration's "move traffic")
  handover   {"from": [...], "acceptFrom": [...]}: LB node addresses of the other platform
It lives in its own namespace, shop-py, so it can run beside the TypeScript one on one platform.
"""

import pulumi
import pulumi_kubernetes as k8s
import pulumi_portable_lb as plb

WEB_PORT = 80
NAMESPACE = "shop-py"


async def platform_value(platform: pulumi.StackReference, stack: str, name: str):
    """One of the platform stack's outputs, known now (the Service is checked against it at preview)."""
    details = await platform.get_output_details(name)
    value = details.value if details.value is not None else details.secret_value
    if value is None:
        raise pulumi.RunError(
            f'the platform stack {stack} has no output "{name}"; '
            "set `platform` to a portable-lb platform stack (its PortableCluster outputs vipPools and loadBalancerClass)"
        )
    return value


async def main():
    config = pulumi.Config()
    stack = config.require("platform")
    platform = pulumi.StackReference("platform", stack_name=stack)
    vip_pools = await platform_value(platform, stack, "vipPools")
    load_balancer_class = await platform_value(platform, stack, "loadBalancerClass")
    provider = k8s.Provider("platform", kubeconfig=platform.require_output("kubeconfig"))

    ns = k8s.core.v1.Namespace(
        "shop",
        metadata={"name": NAMESPACE, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}},
        opts=pulumi.ResourceOptions(provider=provider),
    )
    labels = {"app": "web"}
    replicas = config.get_int("replicas")
    web = k8s.apps.v1.Deployment(
        "web",
        metadata={"name": "web", "namespace": ns.metadata.name, "labels": labels},
        spec={
            "replicas": replicas if replicas is not None else 2,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 65534,
                        "seccompProfile": {"type": "RuntimeDefault"},
                        # Port 80 as a non-root user: direct server return hands packets over
                        # unchanged, so the pods listen on the port clients use.
                        "sysctls": [{"name": "net.ipv4.ip_unprivileged_port_start", "value": str(WEB_PORT)}],
                    },
                    "containers": [
                        {
                            "name": "web",
                            "image": config.require("image"),
                            "args": ["--listen", f":{WEB_PORT}"],
                            "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                            "ports": [{"name": "http", "containerPort": WEB_PORT}],
                            "readinessProbe": {"httpGet": {"path": "/", "port": WEB_PORT}, "periodSeconds": 2},
                            # Drain before SIGTERM: the endpoint is already terminating, open connections finish.
                            "lifecycle": {"preStop": {"sleep": {"seconds": 6}}},
                            "resources": {"requests": {"cpu": "50m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                        }
                    ],
                },
            },
        },
        opts=pulumi.ResourceOptions(provider=provider),
    )

    vip = config.get("vip")
    handover = config.get_object("handover")
    svc = plb.LoadBalancerService(
        "web",
        namespace=ns.metadata.name,
        name="web",
        selector=labels,
        ports=[plb.ServicePortArgs(name="http", port=WEB_PORT, target_port=WEB_PORT)],
        vip_pools=[
            plb.VipPoolArgs(name=p["name"], cidr=p["cidr"], avoid_buggy_ips=p.get("avoidBuggyIps"))
            for p in vip_pools
        ],
        load_balancer_class=load_balancer_class,
        vips=[vip] if vip else None,
        pool=None if vip else config.get("pool") or "web",
        announce=config.get_bool("announce"),
        handover=plb.HandoverArgs(from_=handover.get("from"), accept_from=handover.get("acceptFrom"))
        if handover
        else None,
        # A component's children (the Service) take the cluster's provider from `providers`.
        opts=pulumi.ResourceOptions(providers=[provider], depends_on=[web]),
    )
    address = svc.ingress.apply(lambda ips: ips[0] if ips else "")
    return {"vip": address, "url": pulumi.Output.concat("http://", address, "/")}


pulumi.run(main)
