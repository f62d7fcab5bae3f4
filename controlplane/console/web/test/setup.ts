// setup.ts: what the app's modules expect of a browser when they load, for the logic tests
// under Node (no page is drawn: only pure functions are called).
(globalThis as { location?: unknown }).location = { origin: "http://127.0.0.1:7070", pathname: "/", search: "" };
