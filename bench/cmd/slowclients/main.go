// Command slowclients measures sealgate's peak RSS (VmHWM) with N clients
// that never read their large JSON answers, each on a 4 KiB receive
// window: the memory -max-response-bytes-in-flight bounds.
//
//	go build -o /tmp/sealgate ./cmd/sealgate
//	cd bench && go run ./cmd/slowclients /tmp/sealgate 16 6291456 [sealgate flags]
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	bin, n, size := os.Args[1], atoi(os.Args[2]), atoi(os.Args[3])
	extra := os.Args[4:]
	big := strings.Repeat("x", size-100)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		b := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + big + `"}]}}`
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, b)
	}))
	args := append([]string{"-upstream", "http://" + ln.Addr().String(), "-audience", "https://x", "-principal", "anonymous",
		"-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-log-format", "text", "-max-response-bytes", strconv.Itoa(2 * size)}, extra...)
	cmd := exec.Command(bin, args...)
	errp, _ := cmd.StderrPipe()
	cmd.Start()
	defer cmd.Process.Kill()
	re := regexp.MustCompile(`msg="sealgate: proxying" addr=http://(\S+)`)
	sc := bufio.NewScanner(errp)
	addr := ""
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
			break
		}
	}
	go io.Copy(io.Discard, errp)
	ready := false
	for !ready {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
			fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				ready = resp.StatusCode == 200
			}
			c.Close()
		}
		time.Sleep(100 * time.Millisecond)
	}
	var conns []net.Conn
	refused := 0
	for i := 0; i < n; i++ {
		d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
			return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			panic(err)
		}
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"report"}}`
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		conns = append(conns, c)
	}
	time.Sleep(3 * time.Second) // let every answer be read and held
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		b := make([]byte, 16)
		k, _ := io.ReadFull(c, b)
		if k > 0 && strings.Contains(string(b), "503") {
			refused++
		}
	}
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	hwm := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindStringSubmatch(string(st))
	fmt.Printf("clients=%d answer=%d MiB flags=%v peak_rss=%s kB refused_503=%d\n", n, size>>20, extra, hwm[1], refused)
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }
