import { spawnSync } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createBuiltinTools, FileReadState, type BuiltinTool } from "@/server/workspace/tools";
import { Offloader } from "@/server/workspace/offload/offloader";
import { MAX_OUTPUT_CHARS, TRUNCATION_NOTICE } from "@/server/workspace/tools/text";
import { makeTempMachine } from "./helpers";

let env: Awaited<ReturnType<typeof makeTempMachine>>;
let tools: Record<string, BuiltinTool>;
let w: string;
beforeEach(async () => {
  env = await makeTempMachine();
  w = env.workdir;
  tools = Object.fromEntries(createBuiltinTools(env.machine).map((tool) => [tool.name, tool]));
});
afterEach(() => env.cleanup());

const run = (name: string, input: Record<string, unknown>) => tools[name]!.execute(input);

describe("createBuiltinTools", () => {
  it("returns the six tools in the reference order with JSON-schema inputs", () => {
    const list = createBuiltinTools(env.machine);
    expect(list.map((t) => t.name)).toEqual(["Bash", "Edit", "Glob", "Grep", "Read", "Write"]);
    const bash = list[0]!.inputSchema as {
      type: string;
      properties: Record<string, unknown>;
      required: string[];
    };
    expect(bash.type).toBe("object");
    expect(Object.keys(bash.properties)).toEqual(["command", "description", "timeout"]);
    expect(bash.required).toEqual(["command"]);
    const grep = list[3]!.inputSchema as { properties: Record<string, unknown>; required: string[] };
    expect(grep.required).toEqual(["pattern"]);
    expect(Object.keys(grep.properties)).toContain("-A");
  });

  it("turns invalid input into an error result", async () => {
    const result = await run("Bash", { timeout: "soon" });
    expect(result.isError).toBe(true);
    expect(result.content).toContain("invalid input for Bash");
  });
});

describe("Bash", () => {
  it("runs in the workdir and joins stdout and stderr", async () => {
    const result = await run("Bash", { command: "pwd; echo oops >&2" });
    expect(result).toMatchObject({ isError: false, content: `${w}\n\noops\n` });
  });

  it("reports failures with stdout and stderr sections", async () => {
    const result = await run("Bash", { command: "echo out; echo err >&2; exit 2" });
    expect(result.isError).toBe(true);
    expect(result.content).toBe(
      "Command failed: echo out; echo err >&2; exit 2\n\nStdout:\nout\n\nStderr:\nerr\n",
    );
    expect(result.metadata).toMatchObject({ exitCode: 2 });
  });

  it("times out and says so", async () => {
    const result = await run("Bash", { command: "sleep 20", timeout: 200 });
    expect(result).toMatchObject({ isError: true, content: "Command timed out after 200ms: sleep 20" });
  });

  it("rejects timeouts over the maximum", async () => {
    expect((await run("Bash", { command: "true", timeout: 600_001 })).isError).toBe(true);
  });

  it("truncates at 30000 characters and normalises CRLF", async () => {
    const result = await run("Bash", { command: "head -c 40000 /dev/zero | tr '\\0' x; printf 'a\\r\\nb'" });
    expect(result.content.length).toBe(MAX_OUTPUT_CHARS + TRUNCATION_NOTICE.length);
    expect(result.content.endsWith(TRUNCATION_NOTICE)).toBe(true);
    const crlf = await run("Bash", { command: "printf 'a\\r\\nb'" });
    expect(crlf.content).toBe("a\nb");
  });
});

describe("Read", () => {
  it("numbers lines, honours offset and limit, normalises CR and CRLF", async () => {
    await fs.writeFile(path.join(w, "f.txt"), "one\r\ntwo\rthree\nfour\n");
    const all = await run("Read", { file_path: `${w}/f.txt` });
    expect(all.content).toBe("     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour");
    const slice = await run("Read", { file_path: `${w}/f.txt`, offset: 2, limit: 2 });
    expect(slice.content).toBe("     2\ttwo\n     3\tthree");
    const beyond = await run("Read", { file_path: `${w}/f.txt`, offset: 10 });
    expect(beyond.content).toContain("The file has 4 lines");
  });

  it("cuts lines longer than 2000 characters and caps the limit at 2000", async () => {
    await fs.writeFile(path.join(w, "long.txt"), `${"y".repeat(5000)}\n`);
    const result = await run("Read", { file_path: `${w}/long.txt` });
    expect(result.content).toBe(`     1\t${"y".repeat(2000)}... [truncated]`);
    expect((await run("Read", { file_path: `${w}/long.txt`, limit: 2001 })).isError).toBe(true);
    await fs.writeFile(
      path.join(w, "many.txt"),
      Array.from({ length: 2500 }, (_, i) => `l${i + 1}`).join("\n"),
    );
    const many = await run("Read", { file_path: `${w}/many.txt` });
    expect(many.content.split("\n")).toHaveLength(2000);
    expect(many.metadata).toMatchObject({ hasMore: true });
  });

  it("reports missing files, directories and relative paths", async () => {
    expect((await run("Read", { file_path: `${w}/nope` })).content).toBe(
      `Error: File does not exist: ${w}/nope`,
    );
    expect((await run("Read", { file_path: w })).content).toContain("Error: Path is a directory");
    expect((await run("Read", { file_path: "f.txt" })).content).toContain("must be an absolute path");
  });

  it("attaches images only when the model accepts them", async () => {
    await fs.writeFile(path.join(w, "p.png"), Buffer.from([0x89, 0x50, 0x4e, 0x47]));
    expect((await run("Read", { file_path: `${w}/p.png` })).isError).toBe(true);
    const [, , , , read] = createBuiltinTools(env.machine, { acceptedMediaTypes: ["image/png"] });
    const result = await read!.execute({ file_path: `${w}/p.png` });
    expect(result.attachments?.[0]).toMatchObject({ mediaType: "image/png", base64: "iVBORw==" });
  });
});

describe("offload references (workspace:///…)", () => {
  it("Read, Grep and Glob accept the reference the offloader handed out, mapped under the workdir", async () => {
    const offloader = new Offloader(() => env.machine);
    const reference = await offloader.offloadToolResult("sess1", "call_1", "line one\nneedle two\n");
    expect(reference).toBe("workspace:///sessions/sess1/tool_result-call_1.txt");
    const read = await run("Read", { file_path: reference });
    expect(read).toMatchObject({ isError: false, content: "     1\tline one\n     2\tneedle two" });
    const grep = await run("Grep", { pattern: "needle", path: reference, output_mode: "content" });
    expect(grep).toMatchObject({ isError: false, content: "2:needle two" });
    const glob = await run("Glob", { pattern: "*.txt", path: "workspace:///sessions/sess1" });
    expect(glob.content).toBe(`${w}/sessions/sess1/tool_result-call_1.txt`);
    // Percent-encoded segments decode like a URL path.
    await fs.writeFile(path.join(w, "a b.txt"), "spaced\n");
    expect((await run("Read", { file_path: "workspace:///a%20b.txt" })).content).toBe("     1\tspaced");
  });

  it("a reference is confined like a path: .., symlinks out, other authorities and bad escapes are refused", async () => {
    await fs.writeFile(path.join(env.root, "secret.txt"), "top secret\n");
    await fs.symlink(env.root, path.join(w, "outside-dir"));
    for (const reference of [
      "workspace:///../secret.txt",
      "workspace:///%2e%2e/secret.txt",
      "workspace:///outside-dir/secret.txt",
      "workspace://host/secret.txt",
      "workspace:///%zz",
    ]) {
      for (const result of [
        await run("Read", { file_path: reference }),
        await run("Grep", { pattern: "secret", path: reference }),
        await run("Glob", { pattern: "*", path: reference }),
      ]) {
        expect(result.isError, `${reference}: ${result.content}`).toBe(true);
        expect(result.content).not.toContain("top secret");
      }
    }
  });
});

describe("Write and Edit", () => {
  it("writes new files with parents and counts lines", async () => {
    const result = await run("Write", { file_path: `${w}/a/b/new.txt`, content: "x\ny\n" });
    expect(result).toMatchObject({
      isError: false,
      content: `The file ${w}/a/b/new.txt has been written successfully (2 lines).`,
    });
    expect(await fs.readFile(path.join(w, "a/b/new.txt"), "utf8")).toBe("x\ny\n");
  });

  it("refuses to overwrite a file that was not read, then allows it after Read", async () => {
    await fs.writeFile(path.join(w, "e.txt"), "old\n");
    const refused = await run("Write", { file_path: `${w}/e.txt`, content: "new\n" });
    expect(refused.content).toContain("exists but has not been read yet");
    await run("Read", { file_path: `${w}/e.txt` });
    const written = await run("Write", { file_path: `${w}/e.txt`, content: "new\n" });
    expect(written.isError).toBe(false);
    expect(written.metadata?.diff).toContain("-old\n+new");
  });

  it("Edit requires a prior Read", async () => {
    await fs.writeFile(path.join(w, "e.txt"), "a b a");
    const result = await run("Edit", { file_path: `${w}/e.txt`, old_string: "b", new_string: "c" });
    expect(result.content).toBe("Error: To edit a file, you must first read it using the Read tool.");
  });

  it("Edit enforces uniqueness, replace_all, no-op and not-found rules", async () => {
    await fs.writeFile(path.join(w, "e.txt"), "a b a $x");
    await run("Read", { file_path: `${w}/e.txt` });
    const file_path = `${w}/e.txt`;
    expect((await run("Edit", { file_path, old_string: "a", new_string: "a" })).content).toContain(
      "exactly the same",
    );
    expect((await run("Edit", { file_path, old_string: "zz", new_string: "q" })).content).toContain(
      "not found",
    );
    expect((await run("Edit", { file_path, old_string: "a", new_string: "q" })).content).toContain(
      "old_string appears 2 times",
    );
    expect(await fs.readFile(path.join(w, "e.txt"), "utf8")).toBe("a b a $x");
    const one = await run("Edit", { file_path, old_string: "b", new_string: "$&" });
    expect(one.content).toBe(`Successfully replaced 1 occurrence in ${file_path}`);
    const all = await run("Edit", { file_path, old_string: "a", new_string: "Q", replace_all: true });
    expect(all.content).toBe(`Successfully replaced all 2 occurrences in ${file_path}`);
    expect(await fs.readFile(path.join(w, "e.txt"), "utf8")).toBe("Q $& Q $x");
  });

  it("readState: null turns the read-before-write rule off", async () => {
    await fs.writeFile(path.join(w, "e.txt"), "old");
    const [, edit] = createBuiltinTools(env.machine, { readState: null });
    expect(
      (await edit!.execute({ file_path: `${w}/e.txt`, old_string: "old", new_string: "new" })).isError,
    ).toBe(false);
    const shared = new FileReadState();
    expect(shared.hasRead(`${w}/e.txt`)).toBe(false);
  });
});

describe("Glob", () => {
  beforeEach(async () => {
    await fs.mkdir(path.join(w, "src/deep"), { recursive: true });
    await fs.mkdir(path.join(w, ".hidden"));
    await fs.writeFile(path.join(w, "src/a.ts"), "");
    await fs.writeFile(path.join(w, "src/deep/b.ts"), "");
    await fs.writeFile(path.join(w, "src/c.js"), "");
    await fs.writeFile(path.join(w, ".hidden/h.ts"), "");
    await fs.utimes(path.join(w, "src/a.ts"), 1000, 1000);
    await fs.utimes(path.join(w, "src/deep/b.ts"), 3000, 3000);
  });

  it("matches ** and * and sorts newest first", async () => {
    const result = await run("Glob", { pattern: "**/*.ts" });
    expect(result.content.split("\n")).toEqual([`${w}/src/deep/b.ts`, `${w}/src/a.ts`]);
    expect((await run("Glob", { pattern: "src/*.ts" })).content).toBe(`${w}/src/a.ts`);
    expect((await run("Glob", { pattern: "*.js", path: `${w}/src` })).content).toBe(`${w}/src/c.js`);
    expect((await run("Glob", { pattern: ".hidden/*" })).content).toBe(`${w}/.hidden/h.ts`);
  });

  it("reports no match and a missing directory", async () => {
    expect((await run("Glob", { pattern: "*.rs" })).content).toBe("No files found matching pattern: *.rs");
    expect((await run("Glob", { pattern: "*", path: `${w}/nope` })).content).toBe(
      `Directory not found: ${w}/nope`,
    );
  });
});

// Grep runs ripgrep where the machine has it and GNU grep otherwise: the same cases hold for both. CI
// installs ripgrep (.ci/run), so there both run; elsewhere a missing ripgrep skips its half, saying so.
const ripgrepInstalled = spawnSync("rg", ["--version"]).status === 0;
if (process.env.CI && !ripgrepInstalled) throw new Error("ripgrep is missing: .ci/run installs it");

describe.each([
  { program: "grep" as const, skip: false },
  { program: "ripgrep" as const, skip: !ripgrepInstalled },
])("Grep with $program", ({ program, skip }) => {
  const grep = (input: Record<string, unknown>) =>
    createBuiltinTools(env.machine, { grepProgram: program })
      .find((tool) => tool.name === "Grep")!
      .execute(input);

  beforeEach(async (context) => {
    if (skip) context.skip("ripgrep is not installed here (apt-get install ripgrep)");
    await fs.mkdir(path.join(w, "src"), { recursive: true });
    await fs.mkdir(path.join(w, ".git"));
    await fs.writeFile(path.join(w, "src/a.ts"), "const alpha = 1;\nconst beta = 2;\nalpha();\n");
    await fs.writeFile(path.join(w, "src/b.py"), "ALPHA = 3\n");
    await fs.writeFile(path.join(w, ".git/config"), "alpha\n");
  });

  it("lists files with matches by default, skipping VCS folders", async () => {
    const result = await grep({ pattern: "alpha" });
    expect(result.content).toBe(`${w}/src/a.ts`);
    expect((await grep({ pattern: "alpha", i: true })).content).toBe(`${w}/src/a.ts\n${w}/src/b.py`);
  });

  it("content mode with line numbers, context, count, type and glob filters", async () => {
    const content = await grep({ pattern: "alpha", output_mode: "content" });
    expect(content.content).toBe(`${w}/src/a.ts:1:const alpha = 1;\n${w}/src/a.ts:3:alpha();`);
    const count = await grep({ pattern: "alpha", output_mode: "count", i: true });
    expect(count.content.split("\n").sort()).toEqual([`${w}/src/a.ts:2`, `${w}/src/b.py:1`]);
    expect((await grep({ pattern: "ALPHA", type: "py" })).content).toBe(`${w}/src/b.py`);
    expect((await grep({ pattern: "alpha", i: true, glob: "*.{py,rb}" })).content).toBe(`${w}/src/b.py`);
    expect((await grep({ pattern: "alpha", i: true, glob: "!*.py" })).content).toBe(`${w}/src/a.ts`);
    const withContext = await grep({ pattern: "beta", output_mode: "content", "-B": 1 });
    expect(withContext.content).toBe(`${w}/src/a.ts-1-const alpha = 1;\n${w}/src/a.ts:2:const beta = 2;`);
  });

  it("supports Perl-style classes and multiline matches", async () => {
    expect((await grep({ pattern: "\\d;$" })).content).toBe(`${w}/src/a.ts`);
    const multi = await grep({ pattern: "alpha = 1;.const", multiline: true, output_mode: "content" });
    // GNU grep prints the matched text, ripgrep the lines it spans (numbered).
    expect(multi.content).toBe(
      program === "grep"
        ? `${w}/src/a.ts:alpha = 1;\nconst`
        : `${w}/src/a.ts:1:const alpha = 1;\n${w}/src/a.ts:2:const beta = 2;`,
    );
    expect((await grep({ pattern: "alpha = 1;.const", output_mode: "content" })).content).toBe(
      "No matches found for pattern: alpha = 1;.const",
    );
  });

  it("paginates with head_limit and offset", async () => {
    const lines = Array.from({ length: 300 }, (_, i) => `hit ${i}`).join("\n");
    await fs.writeFile(path.join(w, "many.txt"), lines);
    const first = await grep({ pattern: "hit", output_mode: "content", path: `${w}/many.txt` });
    expect(first.content.split("\n\n")[0]!.split("\n")).toHaveLength(250);
    expect(first.content.endsWith("[Showing results with pagination = limit: 250]")).toBe(true);
    const page = await grep({
      pattern: "hit",
      output_mode: "content",
      path: `${w}/many.txt`,
      head_limit: 2,
      offset: 5,
    });
    expect(page.content).toBe("6:hit 5\n7:hit 6\n\n[Showing results with pagination = limit: 2, offset: 5]");
    const all = await grep({ pattern: "hit", output_mode: "content", path: `${w}/many.txt`, head_limit: 0 });
    expect(all.content.split("\n")).toHaveLength(300);
  });

  it("reports no match as success and a bad regex as an error naming the program", async () => {
    expect(await grep({ pattern: "zzz" })).toMatchObject({
      isError: false,
      content: "No matches found for pattern: zzz",
    });
    expect((await grep({ pattern: "(" })).content).toMatch(new RegExp(`^${program} error \\(code 2\\)`));
  });

  it("searches hidden files; ripgrep leaves out what a git repository's .gitignore ignores", async () => {
    await fs.writeFile(path.join(w, ".env.sample"), "alpha\n");
    await fs.writeFile(path.join(w, ".gitignore"), "build/\n");
    await fs.mkdir(path.join(w, "build"));
    await fs.writeFile(path.join(w, "build/out.js"), "alpha\n");
    const found = (await grep({ pattern: "alpha" })).content.split("\n");
    expect(found).toContain(`${w}/.env.sample`);
    expect(found.includes(`${w}/build/out.js`)).toBe(program === "grep");
  });
});

describe("Grep's program", () => {
  it("is ripgrep where the machine has it, else GNU grep (the error text names it)", async () => {
    const [grepTool] = createBuiltinTools(env.machine).filter((tool) => tool.name === "Grep");
    const failed = await grepTool!.execute({ pattern: "(" });
    expect(failed.content).toMatch(ripgrepInstalled ? /^ripgrep error/ : /^grep error/);
  });
});

describe("confinement of every file tool", () => {
  beforeEach(async () => {
    await fs.writeFile(path.join(env.root, "secret.txt"), "top secret\n");
    await fs.symlink(path.join(env.root, "secret.txt"), path.join(w, "secret-link"));
    await fs.symlink(env.root, path.join(w, "outside-dir"));
  });

  // Test names are built before the workdir exists, so "W" stands for it.
  const escapes = (name: string) =>
    [
      "W/../secret.txt",
      "W/secret-link",
      "W/outside-dir/secret.txt",
      "W/outside-dir/new.txt",
      "/etc/passwd",
    ].map((p) => [name, p] as const);

  it.each([...escapes("Read"), ...escapes("Write"), ...escapes("Edit")])(
    "%s refuses %s",
    async (name, pattern) => {
      const p = pattern.replace(/^W/, w);
      const input =
        name === "Read"
          ? { file_path: p }
          : name === "Write"
            ? { file_path: p, content: "pwned" }
            : { file_path: p, old_string: "top", new_string: "pwned" };
      const [, edit, , , read, write] = createBuiltinTools(env.machine, { readState: null });
      const tool = { Read: read, Write: write, Edit: edit }[name]!;
      const result = await tool.execute(input);
      expect(result.isError).toBe(true);
      expect(result.content).toMatch(/outside the workspace/);
      expect(await fs.readFile(path.join(env.root, "secret.txt"), "utf8")).toBe("top secret\n");
      await expect(fs.access(path.join(env.root, "new.txt"))).rejects.toThrow();
    },
  );

  it.each(["W/..", "W/outside-dir", "/"])("Glob and Grep refuse path %s", async (pattern) => {
    const p = pattern.replace(/^W/, w);
    const glob = await run("Glob", { pattern: "*", path: p });
    const grep = await run("Grep", { pattern: "secret", path: p });
    expect(glob.isError && grep.isError).toBe(true);
    expect(glob.content + grep.content).not.toContain("top secret");
  });

  it("Glob refuses absolute and .. patterns leaving the workdir", async () => {
    expect((await run("Glob", { pattern: `${env.root}/*.txt` })).isError).toBe(true);
    expect((await run("Glob", { pattern: "../*.txt" })).isError).toBe(true);
  });

  it("Glob and Grep do not descend into a symlinked folder", async () => {
    expect((await run("Glob", { pattern: "**/*.txt" })).content).toBe(
      "No files found matching pattern: **/*.txt",
    );
    expect((await run("Grep", { pattern: "secret" })).content).toBe("No matches found for pattern: secret");
  });
});

describe("Write keeps permissions", () => {
  it("an executable stays executable after Write and Edit", async () => {
    const file = path.join(w, "run.sh");
    await fs.writeFile(file, "echo one\n", { mode: 0o755 });
    await run("Read", { file_path: file });
    await run("Write", { file_path: file, content: "echo two\n" });
    await run("Edit", { file_path: file, old_string: "two", new_string: "three" });
    expect((await fs.stat(file)).mode & 0o777).toBe(0o755);
    expect((await run("Bash", { command: "./run.sh" })).content).toBe("three\n");
  });
});
