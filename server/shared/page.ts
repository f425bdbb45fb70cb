import { z } from "zod";

/** One page of a cursor-paginated list; pass `nextCursor` back as `cursor` for the next page. */
export type Page<T> = { items: T[]; nextCursor: string | null };

/** The `{ cursor?, limit? }` input of every list endpoint (the data layer clamps and defaults the limit). */
export const ZPageInput = z.object({
  limit: z.number().int().min(1).max(200).optional().describe("Page size, 1–200 (default 50)."),
  cursor: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe("The previous page's `nextCursor`; absent for the first page."),
});

/** The output schema of a page of `item`s (e.g. a router's `.output(ZPageOf(ZAgentView))`). */
export function ZPageOf<Item extends z.ZodType>(item: Item) {
  return z.object({ items: z.array(item), nextCursor: z.string().nullable() });
}

/**
 * The `findMany` paging arguments for a page of `limit` rows after the row `cursor` (by id): one row more
 * than the page, so `paginate` can tell whether another page follows without a count query. The caller's
 * `orderBy` must end with a unique column (id) for the cursor to be stable.
 */
export function pageArgs(
  limit: number,
  cursor: string | undefined,
): { take: number; cursor?: { id: string }; skip?: number } {
  return { take: limit + 1, ...(cursor ? { cursor: { id: cursor }, skip: 1 } : {}) };
}

/**
 * Turns rows fetched with `pageArgs(limit, …)` (`take: limit + 1`) into a page: the first `limit` rows
 * (mapped, e.g. to a DTO) and, when the extra row came back, the id of the page's last row as the cursor.
 */
export function paginate<Row extends { id: string }>(rows: Row[], limit: number): Page<Row>;
export function paginate<Row extends { id: string }, Item>(
  rows: Row[],
  limit: number,
  map: (row: Row) => Item,
): Page<Item>;
export function paginate<Row extends { id: string }, Item>(
  rows: Row[],
  limit: number,
  map?: (row: Row) => Item,
): Page<Row | Item> {
  const kept = rows.slice(0, limit);
  return {
    items: map ? kept.map((row) => map(row)) : kept,
    nextCursor: rows.length > limit ? (kept.at(-1)?.id ?? null) : null,
  };
}
