/**
 * `npm ci` must not need a compiler for the dashboard terminal on the platforms Berth supports: the pinned
 * node-pty has to ship a prebuilt `pty.node` for each (its install script then skips node-gyp), and it has to
 * be an optional dependency, so a platform without a prebuild and without a compiler still installs (only
 * terminals then fail, with host-pty.ts's UNAVAILABLE error).
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const REPO = path.resolve(import.meta.dirname, "../../..");
const SUPPORTED = ["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64"];

type PackageJson = {
  version: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
};
const readJson = (file: string) => JSON.parse(readFileSync(file, "utf8")) as PackageJson;

describe("node-pty installs without a compiler", () => {
  const berth = readJson(path.join(REPO, "package.json"));
  const nodePtyDir = path.join(REPO, "node_modules/node-pty");

  it("is an exact-pinned optional dependency, and the installed one is that version", () => {
    expect(berth.dependencies?.["node-pty"]).toBeUndefined();
    const pinned = berth.optionalDependencies?.["node-pty"];
    expect(pinned).toMatch(/^\d+\.\d+\.\d+(-[\w.]+)?$/);
    expect(readJson(path.join(nodePtyDir, "package.json")).version).toBe(pinned);
  });

  it.each(SUPPORTED)("ships a prebuilt binary for %s", (platform) => {
    expect(existsSync(path.join(nodePtyDir, "prebuilds", platform, "pty.node"))).toBe(true);
  });

  it("macOS prebuilds carry their spawn helper", () => {
    for (const platform of ["darwin-x64", "darwin-arm64"]) {
      expect(existsSync(path.join(nodePtyDir, "prebuilds", platform, "spawn-helper"))).toBe(true);
    }
  });
});
