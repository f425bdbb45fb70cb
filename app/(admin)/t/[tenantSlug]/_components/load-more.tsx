"use client";

/** The pages of an infinite query that has more: its "Load more" button, for every cursor-paged list. */
export function LoadMore({
  query,
}: {
  query: { hasNextPage: boolean; isFetchingNextPage: boolean; fetchNextPage: () => Promise<unknown> };
}) {
  if (!query.hasNextPage) return null;
  return (
    <button
      type="button"
      className="secondary"
      style={{ marginTop: 12 }}
      disabled={query.isFetchingNextPage}
      onClick={() => void query.fetchNextPage()}
    >
      {query.isFetchingNextPage ? "Loading…" : "Load more"}
    </button>
  );
}
