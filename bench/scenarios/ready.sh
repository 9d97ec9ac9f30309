# Sourced by lib.sh and bench/instructions.sh: waiting for a server's ready line and reading
# kafluss's addresses from it. Defines functions only (no variables, traps or directories).

# wait_for_line FILE REGEX SECONDS: prints the first line of FILE matching REGEX.
wait_for_line() {
    local file=$1 regex=$2 seconds=$3 i line
    for ((i = 0; i < seconds * 10; i++)); do
        line=$(grep -m1 -E "$regex" "$file" 2>/dev/null || true)
        if [[ -n $line ]]; then
            echo "$line"
            return 0
        fi
        sleep 0.1
    done
    echo "no line matching /$regex/ in $file after ${seconds}s; it says:" >&2
    tail -20 "$file" >&2
    return 1
}

# kafluss_addresses LINE: sets KAFLUSS_KAFKA and KAFLUSS_FLUSS from kafluss's ready line.
kafluss_addresses() {
    KAFLUSS_KAFKA=$(sed -E 's/.*KAFKA=([^ ]+).*/\1/' <<<"$1")
    KAFLUSS_FLUSS=$(sed -E 's/.*FLUSS=([^ ]+).*/\1/' <<<"$1")
}
