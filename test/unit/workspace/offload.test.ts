import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Offloader } from "@/server/workspace/offload/offloader";
import { parseWorkspaceReference, toWorkspaceReference } from "@/server/workspace/offload/references";
import { makeTempMachine, streamToString } from "./helpers";

let env: Awaited<ReturnType<typeof makeTempMachine>>;
let offloader: Offloader;
beforeEach(async () => {
  env = await makeTempMachine();
  offloader = new Offloader(() => env.machine);
});
afterEach(() => env.cleanup());

const png = Buffer.from("not really a png").toString("base64");

describe("offloadContext", () => {
  it("appends one JSON line per message and returns a workspace reference", async () => {
    const ref = await offloader.offloadContext("s1", [
      { role: "user", content: "hi" },
      { role: "assistant", content: "yo" },
    ]);
    expect(ref).toBe("workspace:///sessions/s1/context.jsonl");
    await offloader.offloadContext("s1", [{ role: "user", content: "again" }]);
    const text = await fs.readFile(path.join(env.workdir, "sessions/s1/context.jsonl"), "utf8");
    expect(text.split("\n")).toEqual([
      '{"role":"user","content":"hi"}',
      '{"role":"assistant","content":"yo"}',
      '{"role":"user","content":"again"}',
      "",
    ]);
  });

  it("offloads base64 data blocks inside messages without mutating the caller's copy", async () => {
    const message = {
      role: "user",
      content: [
        { type: "data", id: "b1", name: "p", source: { type: "base64", data: png, media_type: "image/png" } },
      ],
    };
    await offloader.offloadContext("s1", [message]);
    expect(message.content[0]!.source.type).toBe("base64");
    const line = JSON.parse(
      await fs.readFile(path.join(env.workdir, "sessions/s1/context.jsonl"), "utf8"),
    ) as {
      content: Array<{ source: { url: string } }>;
    };
    const hash = createHash("sha256").update(png).digest("hex");
    expect(line.content[0]!.source).toEqual({
      type: "url",
      url: `workspace:///data/${hash}.png`,
      media_type: "image/png",
    });
  });

  // What this catches is an append that is not one contiguous write under the file's lock (a line lost to
  // a read-modify-write, or interleaved with another's): any two overlapping writers show it, and 10 writers
  // x 6 appends keep the file contended for the whole run. Each append is a flock'd write through util-linux
  // flock (a process per append): 25 x 16 (400 appends) took 23 s of the 2-core CI machine and proved no
  // more, since every one of those lines was also a single write(2).
  it("never loses or tears a line under 10 concurrent writers x 6 appends to one session", async () => {
    const filler = "z".repeat(3000); // lines larger than a pipe buffer make torn writes visible
    const writers = Array.from({ length: 10 }, async (_, writer) => {
      for (let i = 0; i < 6; i++) {
        await offloader.offloadContext("busy", [{ writer, i, filler }]);
      }
    });
    await Promise.all(writers);
    const lines = (await fs.readFile(path.join(env.workdir, "sessions/busy/context.jsonl"), "utf8")).split(
      "\n",
    );
    expect(lines.pop()).toBe("");
    expect(lines).toHaveLength(60);
    const seen = new Set(
      lines.map((line) => {
        const parsed = JSON.parse(line) as { writer: number; i: number; filler: string };
        expect(parsed.filler).toBe(filler);
        return `${parsed.writer}:${parsed.i}`;
      }),
    );
    expect(seen.size).toBe(60);
  }, 120_000); // real appends: generous for a loaded CI machine

  // 8 batches of 5 concurrent appends (two lines each) over 4 sessions: 10 appends race on each session's
  // file, which is what the check needs (it was 20 x 10, 200 appends at a process each).
  it("also keeps lines whole when concurrent batches go to many sessions", async () => {
    await Promise.all(
      Array.from({ length: 8 }, (_, s) =>
        Promise.all(
          Array.from({ length: 5 }, (_, i) =>
            offloader.offloadContext(`s${s % 4}`, [
              { s, i },
              { s, i, second: true },
            ]),
          ),
        ),
      ),
    );
    for (let s = 0; s < 4; s++) {
      const text = await fs.readFile(path.join(env.workdir, `sessions/s${s}/context.jsonl`), "utf8");
      const lines = text
        .trimEnd()
        .split("\n")
        .map((l) => JSON.parse(l) as { s: number });
      expect(lines).toHaveLength(2 * 5 * 2);
    }
  });

  it.each(["../x", "a/b", ".hidden", "", "a\0"])("rejects session id %j", async (sid) => {
    await expect(offloader.offloadContext(sid, [{}])).rejects.toMatchObject({ code: "BAD_REQUEST" });
  });
});

describe("offloadToolResult", () => {
  it("writes tool_result-<id>.txt and then (1), (2) suffixes, also when racing", async () => {
    const first = await offloader.offloadToolResult("s1", "call_1", "one");
    expect(first).toBe("workspace:///sessions/s1/tool_result-call_1.txt");
    const racing = await Promise.all(
      Array.from({ length: 5 }, (_, i) => offloader.offloadToolResult("s1", "call_1", `r${i}`)),
    );
    expect(new Set(racing).size).toBe(5);
    expect(racing.sort()).toEqual(
      [1, 2, 3, 4, 5].map((n) => toWorkspaceReference(`sessions/s1/tool_result-call_1(${n}).txt`)),
    );
    // Two offloaders on one workdir (e.g. two processes) still never overwrite each other.
    const other = new Offloader(() => env.machine);
    const [a, b] = await Promise.all([
      offloader.offloadToolResult("s1", "x", "a"),
      other.offloadToolResult("s1", "x", "b"),
    ]);
    expect(a).not.toBe(b);
  });

  it("concatenates text blocks, tags data blocks and drops other blocks", async () => {
    const ref = await offloader.offloadToolResult("s1", "t", [
      { type: "text", text: "a" },
      { type: "text", text: "b" },
      { type: "data", name: "img", source: { type: "base64", data: png, media_type: "image/png" } },
      { type: "thinking" },
    ]);
    const body = await streamToString(await offloader.open(ref));
    const hash = createHash("sha256").update(png).digest("hex");
    expect(body).toBe(`ab<data url='workspace:///data/${hash}.png' name='img' media_type='image/png'/>`);
  });

  it("rejects tool ids with path tricks", async () => {
    await expect(offloader.offloadToolResult("s1", "../../x", "")).rejects.toMatchObject({
      code: "BAD_REQUEST",
    });
  });
});

describe("AI SDK messages", () => {
  it("offloads inline file and image parts, keeps URL parts", async () => {
    await offloader.offloadContext("s1", [
      {
        role: "user",
        content: [
          { type: "text", text: "look" },
          { type: "file", data: png, mediaType: "application/pdf" },
          { type: "image", image: new Uint8Array([1, 2, 3]), mediaType: "image/png" },
          { type: "file", data: "https://example.com/x.pdf", mediaType: "application/pdf" },
        ],
      },
    ]);
    const line = JSON.parse(
      await fs.readFile(path.join(env.workdir, "sessions/s1/context.jsonl"), "utf8"),
    ) as {
      content: Array<Record<string, string>>;
    };
    expect(line.content[1]!.data).toBe(
      `workspace:///data/${createHash("sha256").update(png).digest("hex")}.pdf`,
    );
    expect(line.content[2]!.image).toMatch(/^workspace:\/\/\/data\/[0-9a-f]{64}\.png$/);
    expect(line.content[3]!.data).toBe("https://example.com/x.pdf");
    expect(
      await fs.readFile(path.join(env.workdir, line.content[2]!.image!.slice("workspace:///".length))),
    ).toEqual(Buffer.from([1, 2, 3]));
  });
});

describe("offloadDataBlock", () => {
  it("stores decoded bytes once under the base64 hash, .bin for unknown types, and passes URL blocks through", async () => {
    const block = {
      type: "data" as const,
      id: "1",
      source: { type: "base64" as const, data: png, media_type: "application/x-odd" },
    };
    const a = await offloader.offloadDataBlock(block);
    const b = await offloader.offloadDataBlock(block);
    expect(a).toEqual(b);
    const hash = createHash("sha256").update(png).digest("hex");
    expect(a.source).toMatchObject({ url: `workspace:///data/${hash}.bin` });
    expect(await fs.readFile(path.join(env.workdir, `data/${hash}.bin`), "utf8")).toBe("not really a png");
    expect(await fs.readdir(path.join(env.workdir, "data"))).toHaveLength(1);
    const url = {
      type: "data" as const,
      source: { type: "url" as const, url: "https://x", media_type: "image/png" },
    };
    expect(await offloader.offloadDataBlock(url)).toBe(url);
  });
});

describe("references", () => {
  it("round-trips paths and resolves back to the bytes", async () => {
    const ref = await offloader.offloadContext("s9", [{ a: 1 }]);
    expect(parseWorkspaceReference(ref)).toBe("sessions/s9/context.jsonl");
    expect(await streamToString(await offloader.open(ref))).toBe('{"a":1}\n');
    expect(parseWorkspaceReference(toWorkspaceReference("dir/with space/ü.txt"))).toBe(
      "dir/with space/ü.txt",
    );
  });

  it.each([
    "file:///etc/passwd",
    "workspace://host/x",
    "workspace:///../secret",
    "workspace:///%2e%2e/secret",
    "workspace:///a/../../b",
  ])("refuses %s", async (ref) => {
    await expect(offloader.open(ref)).rejects.toMatchObject({
      code: expect.stringMatching(/BAD_REQUEST|FORBIDDEN/),
    });
  });

  it("refuses a reference through a symlink that leaves the workspace", async () => {
    await fs.writeFile(path.join(env.root, "secret"), "s");
    await fs.mkdir(path.join(env.workdir, "data"));
    await fs.symlink(path.join(env.root, "secret"), path.join(env.workdir, "data/evil.bin"));
    await expect(offloader.open("workspace:///data/evil.bin")).rejects.toMatchObject({ code: "FORBIDDEN" });
  });
});
