import { configPaths } from "./testStack.ts";

describe("configPaths", () => {
  it("flattens nested objects and arrays into pulumi --path keys", () => {
    expect(
      configPaths({ "p:env": { kind: "lab", nodes: [{ name: "a" }, { name: "b" }], n: 3 }, "p:x": true }),
    ).toEqual([
      ["p:env.kind", "lab"],
      ["p:env.nodes[0].name", "a"],
      ["p:env.nodes[1].name", "b"],
      ["p:env.n", "3"],
      ["p:x", "true"],
    ]);
  });
});
