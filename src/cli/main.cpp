// Placeholder entry point until the pipeline lands (replaced in this issue).
int main() { return 1; }
