import { randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import tar from "tar-stream";
import { expect } from "vitest";
import { createBuiltinTools } from "@/server/workspace/tools";
import type { ContractContext } from "../backend-contract";
import { bytesOf, digestOf, sha256, textOf } from "../support";

/** files and archives through the WorkspaceMachine port, and symlink confinement as the tools see it. */
export function registerFileCases(context: ContractContext): void {
  context.it("files: a multi-MiB stream written and read back whole, and inclusive byte ranges", async () => {
    const { backend } = context;
    const big = randomBytes(3 * 1024 * 1024 + 123);
    await backend.writeFile(
      "files/big.bin",
      Readable.from([big.subarray(0, 1_000_000), big.subarray(1_000_000)]),
    );
    expect(await digestOf(await backend.readFile("files/big.bin"))).toEqual({
      sha: sha256(big),
      size: big.length,
    });
    expect((await backend.stat("files/big.bin"))?.size).toBe(big.length);

    const range = async (start?: number, end?: number) =>
      bytesOf(
        await backend.readFile("files/big.bin", {
          ...(start === undefined ? {} : { start }),
          ...(end === undefined ? {} : { end }),
        }),
      );
    expect((await range(10, 19)).equals(big.subarray(10, 20))).toBe(true);
    expect((await range(0, 0)).equals(big.subarray(0, 1))).toBe(true);
    expect((await range(big.length - 5)).equals(big.subarray(big.length - 5))).toBe(true);
    expect((await range(2_000_000, 2_500_000)).equals(big.subarray(2_000_000, 2_500_001))).toBe(true);
    expect((await range(undefined, 99)).equals(big.subarray(0, 100))).toBe(true);

    await expect(backend.readFile("files/missing.txt")).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(backend.readFile("files")).rejects.toMatchObject({ code: "BAD_REQUEST" });
  });

  context.it(
    "files: replace is atomic (readers see the old or the new file, never a mix) and keeps the mode",
    async () => {
      const { backend } = context;
      const size = 512 * 1024;
      const versions = ["a", "b"].map((letter) => Buffer.alloc(size, letter));
      await backend.writeFile("files/swap.txt", versions[0]!);
      const seen: string[] = [];
      const reads: Promise<void>[] = [];
      for (let round = 0; round < 6; round += 1) {
        reads.push(
          backend.readFile("files/swap.txt").then(async (stream) => {
            const data = await bytesOf(stream);
            seen.push(
              data.length === size && (data.equals(versions[0]!) || data.equals(versions[1]!))
                ? "whole"
                : `mixed:${data.length}`,
            );
          }),
        );
        await backend.writeFile("files/swap.txt", versions[(round + 1) % 2]!);
      }
      await Promise.all(reads);
      expect(seen).toEqual(Array(6).fill("whole"));
      expect((await bytesOf(await backend.readFile("files/swap.txt"))).equals(versions[0]!)).toBe(true);

      await backend.writeFile("files/run.sh", "#!/bin/sh\necho ran\n", { mode: 0o755 });
      expect((await backend.exec(["./files/run.sh"])).stdout.toString()).toBe("ran\n");
    },
  );

  context.it(
    "files: exclusive create refuses an existing path with CONFLICT and leaves it as it was",
    async () => {
      const { backend } = context;
      await backend.writeFile("files/once.txt", "first", { exclusive: true });
      await expect(backend.writeFile("files/once.txt", "second", { exclusive: true })).rejects.toMatchObject({
        code: "CONFLICT",
      });
      expect(await textOf(await backend.readFile("files/once.txt"))).toBe("first");
      // Racing creators: exactly one wins.
      const racers = await Promise.allSettled(
        ["x", "y", "z", "w"].map((body) => backend.writeFile("files/race.txt", body, { exclusive: true })),
      );
      expect(racers.filter((outcome) => outcome.status === "fulfilled")).toHaveLength(1);
      for (const outcome of racers) {
        if (outcome.status === "rejected") expect(outcome.reason).toMatchObject({ code: "CONFLICT" });
      }
    },
  );

  context.it("files: many concurrent appenders lose no bytes and each call lands contiguously", async () => {
    const { backend } = context;
    const writers = 16;
    const block = 32 * 1024;
    const letters = "abcdefghijklmnopqrstuvwxyz".slice(0, writers).split("");
    await Promise.all(
      letters.map((letter) =>
        backend.writeFile("files/log.txt", Buffer.alloc(block, letter), { append: true }),
      ),
    );
    const all = (await bytesOf(await backend.readFile("files/log.txt"))).toString("latin1");
    expect(all.length).toBe(writers * block);
    const runs = all.match(/(.)\1*/g)!;
    expect(runs.map((run) => run.length)).toEqual(Array(writers).fill(block));
    expect(runs.map((run) => run[0]).sort()).toEqual(letters);
  });

  // Issue 11: O_APPEND keeps one write(2) whole, but Node splits buffers over 512 KiB, `cat` writes 128 KiB
  // at a time and a stream arrives in pieces: without a lock held across the call, big appends interleave.
  context.it("files: appends over 512 KiB (bytes and slow streams) each land contiguously", async () => {
    const { backend } = context;
    const bytes = (letter: string) => Buffer.alloc(600 * 1024, letter);
    // A stream that yields between its pieces, so a concurrent append can get in between (if it may).
    const stream = (letter: string) =>
      Readable.from(
        (async function* () {
          for (let piece = 0; piece < 18; piece++) {
            await new Promise((resolve) => setImmediate(resolve));
            yield Buffer.alloc(256 * 1024, letter);
          }
        })(),
      );
    const writes = [
      { letter: "a", size: 600 * 1024, data: () => bytes("a") },
      { letter: "b", size: 600 * 1024, data: () => bytes("b") },
      { letter: "c", size: 600 * 1024, data: () => bytes("c") },
      { letter: "d", size: 600 * 1024, data: () => bytes("d") },
      { letter: "e", size: 18 * 256 * 1024, data: () => stream("e") },
      { letter: "f", size: 18 * 256 * 1024, data: () => stream("f") },
    ];
    await Promise.all(
      writes.map((write) => backend.writeFile("files/big-appends.log", write.data(), { append: true })),
    );
    const all = (await bytesOf(await backend.readFile("files/big-appends.log"))).toString("latin1");
    expect(all.length).toBe(writes.reduce((sum, write) => sum + write.size, 0));
    const runs = (all.match(/(.)\1*/g) ?? []).map((run) => [run[0], run.length]);
    expect(runs.sort()).toEqual(writes.map((write) => [write.letter, write.size]));
  });

  context.it("files: stat, list, mkdir -p, remove, move and realpath", async () => {
    const { backend } = context;
    await backend.mkdir("tree/a/b/c");
    await backend.mkdir("tree/a/b/c");
    await backend.writeFile("tree/a/one.txt", "1");
    await backend.writeFile("tree/a/two.txt", "22");
    expect(await backend.stat("tree/a/b")).toMatchObject({ type: "directory" });
    expect(await backend.stat("tree/a/two.txt")).toMatchObject({ type: "file", size: 2 });
    expect(await backend.stat("tree/nothing")).toBeNull();
    const entries = await backend.list("tree/a");
    expect(entries.map((entry) => [entry.name, entry.type]).sort()).toEqual([
      ["b", "directory"],
      ["one.txt", "file"],
      ["two.txt", "file"],
    ]);
    expect(entries.find((entry) => entry.name === "two.txt")?.size).toBe(2);
    await expect(backend.list("tree/nothing")).rejects.toMatchObject({ code: "NOT_FOUND" });

    await backend.move("tree/a/one.txt", "tree/a/two.txt");
    expect(await textOf(await backend.readFile("tree/a/two.txt"))).toBe("1");
    expect(await backend.stat("tree/a/one.txt")).toBeNull();
    await backend.move("tree/a/b", "tree/moved");
    expect(await backend.stat("tree/moved/c")).toMatchObject({ type: "directory" });

    expect((await backend.exec(["ln", "-s", "a/two.txt", "tree/link"])).exitCode).toBe(0);
    expect(await backend.stat("tree/link")).toMatchObject({ type: "symlink" });
    expect(await backend.realpath("tree/link")).toBe(`${backend.workdir}/tree/a/two.txt`);
    expect(await backend.realpath("tree/./a/../a/two.txt")).toBe(`${backend.workdir}/tree/a/two.txt`);
    expect(await backend.realpath("tree/nothing")).toBeNull();

    await backend.remove("tree/a");
    await backend.remove("tree/a");
    expect(await backend.stat("tree/a")).toBeNull();
  });

  context.it("symlinks out of the workdir never let the file tools read outside it", async () => {
    const { backend } = context;
    await backend.mkdir("links");
    expect((await backend.exec(["ln", "-sfn", "/etc/passwd", "links/passwd"])).exitCode).toBe(0);
    expect((await backend.exec(["ln", "-sfn", "/etc", "links/etc"])).exitCode).toBe(0);
    expect((await backend.exec(["ln", "-sfn", "../../..", "links/up"])).exitCode).toBe(0);
    await backend.writeFile("links/inside.txt", "inside\n");
    expect((await backend.exec(["ln", "-sfn", "inside.txt", "links/ok"])).exitCode).toBe(0);

    const tools = createBuiltinTools(backend, { readState: null });
    const read = tools.find((tool) => tool.name === "Read")!;
    const grep = tools.find((tool) => tool.name === "Grep")!;
    for (const escape of ["links/passwd", "links/etc/passwd", "links/up/etc/passwd"]) {
      const result = await read.execute({ file_path: `${backend.workdir}/${escape}` });
      expect(result.isError, escape).toBe(true);
      expect(result.content).not.toMatch(/root:/);
    }
    const outside = await read.execute({ file_path: "/etc/passwd" });
    expect(outside.isError).toBe(true);
    const searched = await grep.execute({ pattern: "root:", path: `${backend.workdir}/links/etc` });
    expect(searched.content).not.toMatch(/root:x?:0/);
    // A link that stays inside is followed.
    const ok = await read.execute({ file_path: `${backend.workdir}/links/ok` });
    expect(ok).toMatchObject({ isError: false });
    expect(ok.content).toContain("inside");
  });

  context.it(
    "archives: putArchive extracts a tar stream, getArchive streams it back with one top entry",
    async () => {
      const { backend } = context;
      const payload = randomBytes(200 * 1024);
      const pack = tar.pack();
      pack.entry({ name: "pkg/README.md" }, "# pkg\n");
      pack.entry({ name: "pkg/bin/run.sh", mode: 0o755 }, "#!/bin/sh\necho ran\n");
      pack.entry({ name: "pkg/data.bin" }, payload);
      pack.finalize();
      await backend.putArchive("archives/installed", Readable.from(pack));
      expect((await backend.exec(["./archives/installed/pkg/bin/run.sh"])).stdout.toString()).toBe("ran\n");
      expect((await bytesOf(await backend.readFile("archives/installed/pkg/data.bin"))).equals(payload)).toBe(
        true,
      );

      const entries = new Map<string, Buffer>();
      const extract = tar.extract();
      extract.on("entry", (header, stream, next) => {
        const chunks: Buffer[] = [];
        stream.on("data", (chunk: unknown) => chunks.push(chunk as Buffer));
        stream.on("end", () => {
          entries.set(header.name.replace(/\/$/, ""), Buffer.concat(chunks));
          next();
        });
      });
      await pipeline(await backend.getArchive("archives/installed/pkg"), extract);
      expect([...entries.keys()].sort()).toEqual([
        "pkg",
        "pkg/README.md",
        "pkg/bin",
        "pkg/bin/run.sh",
        "pkg/data.bin",
      ]);
      expect(entries.get("pkg/data.bin")!.equals(payload)).toBe(true);
      await expect(backend.getArchive("archives/none")).rejects.toMatchObject({ code: "NOT_FOUND" });
    },
  );
}
