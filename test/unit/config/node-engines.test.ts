import path from "node:path";
import { describe, expect, it } from "vitest";
import { findEngineMismatches } from "@/scripts/check-node-engines";

const REPO_ROOT = path.resolve(import.meta.dirname, "..", "..", "..");

describe("installed packages and the running Node (no EBADENGINE)", () => {
  it("every installed package's engines.node accepts this Node", async () => {
    expect(await findEngineMismatches(REPO_ROOT)).toEqual([]);
  });

  it("reports packages whose range excludes a Node version (here one older than any we support)", async () => {
    const old = await findEngineMismatches(REPO_ROOT, "v16.0.0");
    expect(old.length).toBeGreaterThan(0);
    expect(old[0]).toMatchObject({
      path: expect.stringMatching(/^node_modules\//),
      node: expect.any(String),
    });
  });
});
