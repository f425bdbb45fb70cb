/** One page of a cursor-paginated list; pass `nextCursor` back as `cursor` for the next page. */
export type Page<T> = { items: T[]; nextCursor: string | null };
