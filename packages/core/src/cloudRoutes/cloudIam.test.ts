import { awsCloudRoutesPolicy, gcpCloudRoutesRole } from "./cloudIam.ts";

describe("cloud-routes IAM", () => {
  it("allows AWS route writes only on the route tables in use", () => {
    const policy = awsCloudRoutesPolicy({
      region: "eu-west-1",
      accountId: "123456789012",
      routeTableIds: ["rtb-1", "rtb-2"],
    });
    expect(policy.Statement[0]).toEqual({
      Sid: "PortableLbRouteWrites",
      Effect: "Allow",
      Action: ["ec2:CreateRoute", "ec2:ReplaceRoute", "ec2:DeleteRoute"],
      Resource: [
        "arn:aws:ec2:eu-west-1:123456789012:route-table/rtb-1",
        "arn:aws:ec2:eu-west-1:123456789012:route-table/rtb-2",
      ],
    });
    expect(policy.Statement[1]!.Action).toEqual(["ec2:DescribeRouteTables", "ec2:DescribeInstances"]);
    expect(JSON.stringify(policy)).not.toMatch(/ec2:\*|"Action":"\*"/);
  });

  it("names the field and the fix for bad input", () => {
    expect(() =>
      awsCloudRoutesPolicy({ region: "eu-west-1", accountId: "123456789012", routeTableIds: [] }),
    ).toThrow(/^cloudRoutes.routeTableIds: .*at least one route table/);
    expect(() =>
      awsCloudRoutesPolicy({ region: "eu-west-1", accountId: "12", routeTableIds: ["rtb-1"] }),
    ).toThrow(/accountId: must be a 12-digit AWS account id \(got "12"\)/);
  });

  it("gives the GCP role only compute.routes.* and networks.updatePolicy (plus reading operations)", () => {
    const role = gcpCloudRoutesRole({ project: "p" });
    expect(
      role.permissions.every((p) =>
        /^compute\.(routes\.|networks\.updatePolicy$|globalOperations\.get$)/.test(p),
      ),
    ).toBe(true);
  });
});
