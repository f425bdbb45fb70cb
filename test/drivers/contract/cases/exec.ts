import { randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { expect } from "vitest";
import type { ContractContext } from "../backend-contract";
import { sha256 } from "../support";

/** exec: streams, exit codes, 127, timeouts that kill the whole tree, cancellation, stdin, large output. */
export function registerExecCases(context: ContractContext): void {
  context.it(
    "exec streams stdout and stderr through the callbacks and collects them, with exit codes, env and cwd",
    async () => {
      const { backend } = context;
      const seen: string[] = [];
      const result = await backend.exec(["sh", "-c", "echo out; echo err >&2; echo more; exit 3"], {
        onStdout: (chunk) => seen.push(`o:${chunk.toString()}`),
        onStderr: (chunk) => seen.push(`e:${chunk.toString()}`),
      });
      expect(result).toMatchObject({ exitCode: 3, timedOut: false, killed: false, truncated: false });
      expect(result.stdout.toString()).toBe("out\nmore\n");
      expect(result.stderr.toString()).toBe("err\n");
      expect(
        seen
          .filter((entry) => entry.startsWith("o:"))
          .map((entry) => entry.slice(2))
          .join(""),
      ).toBe("out\nmore\n");
      expect(
        seen
          .filter((entry) => entry.startsWith("e:"))
          .map((entry) => entry.slice(2))
          .join(""),
      ).toBe("err\n");

      expect((await backend.exec(["true"])).exitCode).toBe(0);
      expect((await backend.exec(["sh", "-c", "exit 42"])).exitCode).toBe(42);
      const missing = await backend.exec(["no-such-command-berth-contract"]);
      expect(missing.exitCode).toBe(127);
      // argv is passed without a shell: nothing in it is interpreted.
      expect((await backend.exec(["printf", "%s", 'it\'s "q" $HOME `x` ;|'])).stdout.toString()).toBe(
        'it\'s "q" $HOME `x` ;|',
      );
      await backend.mkdir("exec/sub");
      const placed = await backend.exec(["sh", "-c", 'echo "$GREETING"; pwd'], {
        env: { GREETING: "hello" },
        cwd: "exec/sub",
      });
      expect(placed.stdout.toString()).toBe(`hello\n${backend.workdir}/exec/sub\n`);
      expect((await backend.exec(["pwd"])).stdout.toString()).toBe(`${backend.workdir}\n`);
    },
  );

  context.it("exec passes stdin (stream or bytes) and closes it", async () => {
    const { backend } = context;
    const streamed = await backend.exec(["cat"], {
      stdin: Readable.from([Buffer.from("from "), Buffer.from("a stream\n")]),
    });
    expect(streamed.stdout.toString()).toBe("from a stream\n");
    const payload = randomBytes(256 * 1024);
    const counted = await backend.exec(["sh", "-c", "wc -c"], { stdin: payload });
    expect(counted.stdout.toString().trim()).toBe(String(payload.length));
    expect((await backend.exec(["cat"], { stdin: "text" })).stdout.toString()).toBe("text");
  });

  context.it(
    "a timeout kills the whole process tree: a background grandchild never writes its marker",
    async () => {
      const { backend } = context;
      await backend.remove("exec/late-marker");
      await backend.remove("exec/witness");
      await backend.mkdir("exec");
      const started = Date.now();
      const timedOut = await backend.exec(
        ["sh", "-c", "(sleep 1; echo late > exec/late-marker) & echo started; sleep 300"],
        { timeoutMs: 500 },
      );
      expect(timedOut).toMatchObject({ exitCode: -1, timedOut: true, killed: false });
      expect(timedOut.stdout.toString()).toBe("started\n");
      expect(Date.now() - started).toBeLessThan(15_000);
      // The witness starts after the grandchild and sleeps as long: once it has written, a live grandchild
      // would have written too (its deadline passed first), so no sleep is needed to know.
      const witness = await backend.exec(["sh", "-c", "sleep 1; echo w > exec/witness"]);
      expect(witness.exitCode).toBe(0);
      expect(await backend.stat("exec/witness")).not.toBeNull();
      expect(await backend.stat("exec/late-marker")).toBeNull();
    },
  );

  context.it("an AbortSignal kills the running command (and its children)", async () => {
    const { backend } = context;
    await backend.remove("exec/aborted-marker");
    const controller = new AbortController();
    const running = backend.exec(
      ["sh", "-c", "(sleep 1; echo late > exec/aborted-marker) & echo started; sleep 300"],
      { signal: controller.signal, onStdout: () => controller.abort() },
    );
    expect(await running).toMatchObject({ exitCode: -1, killed: true, timedOut: false });
    const witness = await backend.exec(["sh", "-c", "sleep 1; echo w > exec/witness2"]);
    expect(witness.exitCode).toBe(0);
    expect(await backend.stat("exec/aborted-marker")).toBeNull();

    const already = new AbortController();
    already.abort();
    expect(await backend.exec(["sleep", "300"], { signal: already.signal })).toMatchObject({ killed: true });
  });

  context.it(
    "large output: several MiB of text arrive whole; maxBufferBytes cuts the collected copy and says so",
    async () => {
      const { backend } = context;
      // Text (base64 lines), so that this case is about size; byte-exactness of binary output is the next one.
      const big = Buffer.from(
        randomBytes(4 * 1024 * 1024)
          .toString("base64")
          .replace(/.{76}/g, "$&\n"),
      );
      await backend.writeFile("exec/big.txt", big);
      const whole = await backend.exec(["cat", "exec/big.txt"]);
      expect(whole.truncated).toBe(false);
      expect(whole.stdout.length).toBe(big.length);
      expect(sha256(whole.stdout)).toBe(sha256(big));

      let streamed = 0;
      const capped = await backend.exec(["sh", "-c", `head -c ${6 * 1024 * 1024} /dev/zero | tr '\\0' x`], {
        maxBufferBytes: 1024 * 1024,
        onStdout: (chunk) => (streamed += chunk.length),
      });
      expect(capped).toMatchObject({ exitCode: 0, truncated: true });
      expect(capped.stdout.length).toBe(1024 * 1024);
      expect(streamed).toBe(6 * 1024 * 1024);
    },
  );

  context.it("binary output: stdout carries arbitrary bytes unchanged", async () => {
    const { backend } = context;
    const bytes = randomBytes(1024 * 1024 + 3);
    await backend.writeFile("exec/big.bin", bytes);
    const seen: Buffer[] = [];
    const result = await backend.exec(["cat", "exec/big.bin"], { onStdout: (chunk) => seen.push(chunk) });
    expect(result.stdout.length).toBe(bytes.length);
    expect(sha256(result.stdout)).toBe(sha256(bytes));
    expect(sha256(Buffer.concat(seen))).toBe(sha256(bytes));
  });
}
