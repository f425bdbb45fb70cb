import { createServer } from "node:net";

/** Asks the kernel for a free loopback port (never the well-known 5432/6379 of system services). */
export async function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => (port ? resolve(port) : reject(new Error("could not pick a free port"))));
    });
  });
}
