import fs from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { isAppError } from "@/server/shared/errors";
import type { HostFolderMachine } from "@/server/workspace/drivers/host-folder/host-folder-machine";
import { makeTempMachine, streamToString } from "./helpers";

let env: Awaited<ReturnType<typeof makeTempMachine>>;
let backend: HostFolderMachine;
beforeEach(async () => {
  env = await makeTempMachine();
  backend = env.machine;
});
afterEach(() => env.cleanup());

describe("HostFolderMachine.exec", () => {
  it("runs argv without a shell, in the workdir, streaming both outputs", async () => {
    const seen: string[] = [];
    const result = await backend.exec(["sh", "-c", 'pwd; echo err >&2; echo "$0"', "$HOME"], {
      onStdout: (chunk) => seen.push(chunk.toString()),
    });
    expect(result.exitCode).toBe(0);
    expect(result.stdout.toString()).toBe(`${env.workdir}\n$HOME\n`);
    expect(result.stderr.toString()).toBe("err\n");
    expect(seen.join("")).toBe(result.stdout.toString());
  });

  it("does not leak the host environment, but passes the given env", async () => {
    const result = await backend.exec(["sh", "-c", 'echo "[$BERTH_SECRET][$FOO]"'], { env: { FOO: "bar" } });
    expect(result.stdout.toString()).toBe("[][bar]\n");
  });

  it("returns 127 when the program cannot start", async () => {
    const result = await backend.exec(["/definitely/not/here"]);
    expect(result.exitCode).toBe(127);
    expect(result.stderr.toString()).toContain("ENOENT");
  });

  it("reports non-zero exit codes and feeds stdin", async () => {
    const result = await backend.exec(["sh", "-c", "cat; exit 3"], { stdin: "hello" });
    expect(result).toMatchObject({ exitCode: 3, timedOut: false, killed: false });
    expect(result.stdout.toString()).toBe("hello");
  });

  it("kills the whole process group on timeout", async () => {
    const pidFile = path.join(env.workdir, "grandchild.pid");
    const result = await backend.exec(["sh", "-c", `sleep 30 & echo $! > ${pidFile}; wait`], {
      timeoutMs: 300,
    });
    expect(result).toMatchObject({ exitCode: -1, timedOut: true });
    const grandchild = Number(await fs.readFile(pidFile, "utf8"));
    // The backgrounded sleep was in the same process group, so it must be gone too.
    await vi.waitFor(() => expect(isRunning(grandchild)).toBe(false), { timeout: 5000 });
  });

  it("kills on abort", async () => {
    const controller = new AbortController();
    const running = backend.exec(["sleep", "30"], { signal: controller.signal });
    controller.abort();
    await expect(running).resolves.toMatchObject({ exitCode: -1, killed: true });
  });

  it("caps the collected output but streams everything to the callback", async () => {
    let streamed = 0;
    const result = await backend.exec(["sh", "-c", "head -c 100000 /dev/zero"], {
      maxBufferBytes: 1000,
      onStdout: (chunk) => (streamed += chunk.length),
    });
    expect(result.stdout.length).toBe(1000);
    expect(result.truncated).toBe(true);
    expect(streamed).toBe(100000);
  });
});

describe("HostFolderMachine files", () => {
  it("writes from a stream, reads back ranges, appends", async () => {
    await backend.writeFile("a/b/c.txt", Readable.from(["hello ", "world"]));
    expect(await streamToString(await backend.readFile("a/b/c.txt"))).toBe("hello world");
    expect(await streamToString(await backend.readFile("a/b/c.txt", { start: 6, end: 10 }))).toBe("world");
    await backend.writeFile("a/b/c.txt", "!", { append: true });
    expect(await fs.readFile(path.join(env.workdir, "a/b/c.txt"), "utf8")).toBe("hello world!");
    // No temp files left beside the target.
    expect(await fs.readdir(path.join(env.workdir, "a/b"))).toEqual(["c.txt"]);
  });

  it("exclusive writes refuse an existing file with CONFLICT", async () => {
    await backend.writeFile("x.txt", "one", { exclusive: true });
    await expect(backend.writeFile("x.txt", "two", { exclusive: true })).rejects.toMatchObject({
      code: "CONFLICT",
    });
    expect(await fs.readFile(path.join(env.workdir, "x.txt"), "utf8")).toBe("one");
  });

  it("maps missing files to NOT_FOUND and directories to BAD_REQUEST", async () => {
    const missing = await backend.readFile("nope").catch((e: unknown) => e);
    expect(isAppError(missing) && missing.code).toBe("NOT_FOUND");
    await backend.mkdir("d");
    await expect(backend.readFile("d")).rejects.toMatchObject({ code: "BAD_REQUEST" });
    await expect(backend.list("nope")).rejects.toMatchObject({ code: "NOT_FOUND" });
  });

  it("stat (lstat semantics), list, move, remove, realpath", async () => {
    await backend.writeFile("f.txt", "12345");
    await fs.symlink("f.txt", path.join(env.workdir, "link"));
    expect(await backend.stat("f.txt")).toMatchObject({ type: "file", size: 5 });
    expect(await backend.stat("link")).toMatchObject({ type: "symlink" });
    expect(await backend.stat("missing")).toBeNull();
    expect(await backend.realpath("link")).toBe(path.join(env.workdir, "f.txt"));
    expect(await backend.realpath("missing")).toBeNull();
    await backend.mkdir("dir/sub");
    const entries = await backend.list(".");
    expect(entries.map((e) => [e.name, e.type]).sort()).toEqual([
      ["dir", "directory"],
      ["f.txt", "file"],
      ["link", "symlink"],
    ]);
    expect(entries.find((e) => e.name === "dir")?.size).toBeNull();
    await backend.move("f.txt", "dir/sub/g.txt");
    expect(await backend.stat("dir/sub/g.txt")).toMatchObject({ type: "file" });
    await backend.remove("dir");
    await backend.remove("dir"); // idempotent
    expect(await backend.stat("dir")).toBeNull();
  });

  it("round-trips a directory through getArchive/putArchive", async () => {
    await backend.writeFile("src/one.txt", "1");
    await backend.writeFile("src/deep/two.txt", "2");
    const tar = await backend.getArchive("src");
    await backend.putArchive("copy", tar);
    expect(await fs.readFile(path.join(env.workdir, "copy/src/deep/two.txt"), "utf8")).toBe("2");
    await expect(backend.getArchive("missing")).rejects.toMatchObject({ code: "NOT_FOUND" });
  });

  it("repeats none of its driver's facts (the driver says it is not isolated)", () => {
    expect(backend).not.toHaveProperty("isolated");
    expect(backend).not.toHaveProperty("kind");
  });
});

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
