// Tailwind CSS 4 runs as a PostCSS plugin inside `next build`; its native parts (oxide, lightningcss) are npm
// optional packages, so builds stay offline.
export default { plugins: { "@tailwindcss/postcss": {} } };
