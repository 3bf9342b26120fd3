# nginx for the lab's throughput benchmark (nginx as the load balancer, the thesis's Fig. 6.4
# baseline): only the binary, from Debian's package unpacked but never installed (debBinary.sh), so
# no nginx service starts on this machine. Sourced by bootstrap.sh.
install_nginx() { install_deb_binary nginx /usr/sbin/nginx; }
