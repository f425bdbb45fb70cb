import fs from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { assertSafeSegment, isInside, resolveConfined, resolveLexically } from "@/server/workspace/paths";
import { makeTempMachine } from "./helpers";

let env: Awaited<ReturnType<typeof makeTempMachine>>;
beforeEach(async () => {
  env = await makeTempMachine();
});
afterEach(() => env.cleanup());

describe("resolveLexically", () => {
  it("resolves relative paths against the workdir and keeps inside paths", () => {
    expect(resolveLexically("/w", "a/b")).toBe("/w/a/b");
    expect(resolveLexically("/w", "/w/a/../b")).toBe("/w/b");
    expect(resolveLexically("/w", "/w")).toBe("/w");
  });

  it.each(["..", "../x", "/w/../etc/passwd", "/etc/passwd", "/wx", "a/../../x"])("rejects %s", (p) => {
    expect(() => resolveLexically("/w", p)).toThrow(expect.objectContaining({ code: "FORBIDDEN" }));
  });

  it("rejects NUL bytes", () => {
    expect(() => resolveLexically("/w", "a\0b")).toThrow(expect.objectContaining({ code: "BAD_REQUEST" }));
  });

  it("isInside does not confuse prefixes", () => {
    expect(isInside("/w", "/w2")).toBe(false);
    expect(isInside("/w", "/w/x")).toBe(true);
  });
});

describe("resolveConfined", () => {
  it("allows existing and not-yet-existing paths inside", async () => {
    await fs.mkdir(path.join(env.workdir, "d"));
    expect(await resolveConfined(env.machine, `${env.workdir}/d`)).toBe(`${env.workdir}/d`);
    expect(await resolveConfined(env.machine, "d/new/file.txt")).toBe(`${env.workdir}/d/new/file.txt`);
  });

  it("follows inside symlinks to their real target", async () => {
    await fs.mkdir(path.join(env.workdir, "real"));
    await fs.symlink("real", path.join(env.workdir, "alias"));
    expect(await resolveConfined(env.machine, "alias/x.txt")).toBe(`${env.workdir}/real/x.txt`);
  });

  it("rejects a symlinked folder pointing outside, even for a new file below it", async () => {
    await fs.symlink(env.root, path.join(env.workdir, "out"));
    await expect(resolveConfined(env.machine, "out/new.txt")).rejects.toMatchObject({ code: "FORBIDDEN" });
  });

  it("rejects a symlinked file pointing outside", async () => {
    await fs.writeFile(path.join(env.root, "secret"), "s");
    await fs.symlink(path.join(env.root, "secret"), path.join(env.workdir, "s"));
    await expect(resolveConfined(env.machine, "s")).rejects.toMatchObject({ code: "FORBIDDEN" });
  });

  it("rejects a dangling symlink (a write through it would land outside)", async () => {
    await fs.symlink(path.join(env.root, "not-yet"), path.join(env.workdir, "dangling"));
    await expect(resolveConfined(env.machine, "dangling")).rejects.toMatchObject({ code: "FORBIDDEN" });
  });
});

describe("assertSafeSegment", () => {
  it.each(["abc", "a-b_c.d", "0123456789abcdef"])("accepts %s", (s) => {
    expect(assertSafeSegment(s, "session id")).toBe(s);
  });
  it.each(["", ".", "..", ".hidden", "a/b", "a\\b", "a\0b", "a..b", "x".repeat(201)])("rejects %j", (s) => {
    expect(() => assertSafeSegment(s, "session id")).toThrow(
      expect.objectContaining({ code: "BAD_REQUEST" }),
    );
  });
});
