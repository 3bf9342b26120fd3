// Integration tests start daemons and run the Pulumi engine: give them minutes, not Jest's 5 s
// (Jest ignores testTimeout inside a project, so it is set here).
jest.setTimeout(300_000);
