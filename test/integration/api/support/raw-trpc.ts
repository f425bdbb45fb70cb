import superjson from "superjson";

/** The JSON error envelope tRPC answers with (superjson-wrapped). */
export type TrpcErrorBody = {
  error: {
    json: {
      message: string;
      code: number;
      data: {
        code: string;
        httpStatus: number;
        fieldErrors?: Record<string, string[]> | null;
        issues?: { path: string[]; message: string }[] | null;
        appError?: { code: string; details: unknown } | null;
        stack?: unknown;
      };
    };
  };
};

export type RawAnswer = { status: number; text: string; json: () => unknown };

/**
 * One tRPC call as raw HTTP (no typed client): what a hostile caller sends. Queries and subscriptions go
 * as GET with `?input=`, mutations as POST; `input` is serialised with superjson like the client does.
 */
export async function rawTrpcCall(
  baseUrl: string,
  path: string,
  type: "query" | "mutation" | "subscription",
  input: unknown,
  headers: Record<string, string> = {},
): Promise<RawAnswer> {
  const serialized = JSON.stringify(superjson.serialize(input));
  const url = `${baseUrl}/api/trpc/${path}`;
  const response =
    type === "mutation"
      ? await fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json", ...headers },
          body: serialized,
        })
      : await fetch(`${url}?input=${encodeURIComponent(serialized)}`, { headers });
  const text = await response.text();
  return { status: response.status, text, json: () => JSON.parse(text) as unknown };
}

/**
 * The error of a raw answer (throws when it has none). A subscription answers 200 with an SSE stream whose
 * `serialized-error` event carries the error.
 */
export function errorOf(answer: RawAnswer): TrpcErrorBody["error"]["json"] {
  if (/^event: serialized-error$/m.test(answer.text)) {
    const data = /^event: serialized-error\ndata: (.*)$/m.exec(answer.text)?.[1];
    if (!data) throw new Error(`no error data in ${answer.text.slice(0, 300)}`);
    return (JSON.parse(data) as { json: TrpcErrorBody["error"]["json"] }).json;
  }
  const body = answer.json() as Partial<TrpcErrorBody>;
  if (!body.error) throw new Error(`expected an error, got ${answer.text.slice(0, 300)}`);
  return body.error.json;
}
